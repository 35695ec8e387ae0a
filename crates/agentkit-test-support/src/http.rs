//! A deliberately small HTTP/1.1 client over `std::net::TcpStream`, so
//! tests control every byte they send (the `Host` header, forwarding
//! headers, malformed bodies) and read NDJSON streams line by line.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A complete response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    /// The body parsed as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON error code, for `{"ok": false, "error": {"code"}}` bodies.
    pub fn error_code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// A request under construction.
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    host: Option<String>,
}

impl Request {
    pub fn new(method: &str, path: &str) -> Request {
        Request {
            method: method.to_owned(),
            path: path.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
            host: None,
        }
    }

    pub fn get(path: &str) -> Request {
        Request::new("GET", path)
    }

    pub fn post(path: &str) -> Request {
        Request::new("POST", path)
    }

    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Overrides the `Host` header (the default is the server address).
    pub fn host(mut self, host: &str) -> Request {
        self.host = Some(host.to_owned());
        self
    }

    pub fn bearer(self, token: &str) -> Request {
        self.header("authorization", &format!("Bearer {token}"))
    }

    pub fn json(mut self, value: &serde_json::Value) -> Request {
        self.body = serde_json::to_vec(value).unwrap_or_default();
        self.header("content-type", "application/json")
    }

    pub fn raw_body(mut self, body: &[u8]) -> Request {
        self.body = body.to_vec();
        self
    }

    fn write_to(&self, addr: SocketAddr, stream: &mut TcpStream) -> std::io::Result<()> {
        let host = self.host.clone().unwrap_or_else(|| addr.to_string());
        let mut head = format!(
            "{} {} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\ncontent-length: {}\r\n",
            self.method,
            self.path,
            self.body.len()
        );
        for (n, v) in &self.headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        stream.write_all(&self.body)
    }

    /// Sends the request and reads the whole response (de-chunked).
    pub fn send(&self, addr: SocketAddr) -> std::io::Result<Response> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        // A server may answer before it has read the whole body (a 413 for
        // a body over its limit) and close: the rest of the write then
        // fails, but the answer is there to read, as a real client reads it.
        let write_error = match self.write_to(addr, &mut stream) {
            Ok(()) => None,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                Some(e)
            }
            Err(e) => return Err(e),
        };
        let mut reader = BufReader::new(stream);
        let (status, headers) = match read_head(&mut reader) {
            Ok(head) => head,
            Err(read) => return Err(write_error.unwrap_or(read)),
        };
        let chunked = headers
            .iter()
            .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
        let mut body = Vec::new();
        if chunked {
            while let Some(chunk) = read_chunk(&mut reader)? {
                body.extend_from_slice(&chunk);
            }
        } else {
            reader.read_to_end(&mut body)?;
        }
        Ok(Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }

    /// Sends the request and returns a reader of the (chunked) body's lines,
    /// for NDJSON streams that do not end.
    pub fn stream(&self, addr: SocketAddr) -> std::io::Result<LineStream> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        self.write_to(addr, &mut stream)?;
        let mut reader = BufReader::new(stream);
        let (status, headers) = read_head(&mut reader)?;
        Ok(LineStream {
            status,
            headers,
            reader,
            pending: Vec::new(),
        })
    }
}

fn read_head(reader: &mut impl BufRead) -> std::io::Result<(u16, Vec<(String, String)>)> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_owned(), v.trim().to_owned()));
        }
    }
    Ok((status, headers))
}

/// One chunk of a chunked body; `None` at the end.
fn read_chunk(reader: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    let mut size = String::new();
    if reader.read_line(&mut size)? == 0 {
        return Ok(None);
    }
    let n = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
    let mut chunk = vec![0; n + 2];
    reader.read_exact(&mut chunk)?;
    chunk.truncate(n);
    Ok((n > 0).then_some(chunk))
}

/// The lines of a streamed body.
#[derive(Debug)]
pub struct LineStream {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    pending: Vec<u8>,
}

impl LineStream {
    /// The next complete line as JSON; `None` when the stream ended.
    pub fn next_json(&mut self) -> std::io::Result<Option<serde_json::Value>> {
        loop {
            if let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=pos).collect();
                let value = serde_json::from_slice(&line)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
                return Ok(Some(value));
            }
            match read_chunk(&mut self.reader)? {
                Some(chunk) => self.pending.extend_from_slice(&chunk),
                None => return Ok(None),
            }
        }
    }

    /// The next complete line as sent (without its newline); `None` when
    /// the stream ended. For byte-for-byte comparisons.
    pub fn next_line(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(pos) = self.pending.iter().position(|b| *b == b'\n') {
                let mut line: Vec<u8> = self.pending.drain(..=pos).collect();
                line.pop();
                return Ok(Some(line));
            }
            match read_chunk(&mut self.reader)? {
                Some(chunk) => self.pending.extend_from_slice(&chunk),
                None => return Ok(None),
            }
        }
    }

    /// Reads events until one of type `t` (inclusive).
    pub fn until(&mut self, t: &str) -> std::io::Result<Vec<serde_json::Value>> {
        let mut out = Vec::new();
        while let Some(v) = self.next_json()? {
            let hit = v["type"] == t;
            out.push(v);
            if hit {
                return Ok(out);
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("stream ended before `{t}`"),
        ))
    }
}
