use super::*;

fn project() -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("p/agent/tools")).unwrap();
    std::fs::write(t.path().join("p/agent/instructions.md"), "hi").unwrap();
    t
}

#[test]
fn deep_toml() {
    let t = project();
    let deep = format!("a = {}1{}\n", "[".repeat(10_000), "]".repeat(10_000));
    std::fs::write(t.path().join("p/agent/agent.toml"), &deep).unwrap();
    std::fs::write(t.path().join("p/agent/tools/x.toml"), &deep).unwrap();
    let d = discover_ok(&t.path().join("p"));
    println!("{}", render(&d));
}

#[test]
fn deep_toml_tables() {
    let t = project();
    let deep = format!("a = {}{}\n", "{a = ".repeat(10_000), "}".repeat(10_000));
    std::fs::write(t.path().join("p/agent/agent.toml"), &deep).unwrap();
    let d = discover_ok(&t.path().join("p"));
    println!("{}", render(&d));
}

#[test]
fn deep_schema() {
    let t = project();
    let deep = format!(
        "description = \"x\"\ncommand = [\"true\"]\n[input_schema]\ntype = \"object\"\nx = {}1{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    std::fs::write(t.path().join("p/agent/tools/x.toml"), &deep).unwrap();
    let d = discover_ok(&t.path().join("p"));
    println!("{}", render(&d));
}

#[test]
fn fifo() {
    let t = project();
    let status = std::process::Command::new("mkfifo")
        .arg(t.path().join("p/agent/tools/f.toml"))
        .status()
        .unwrap();
    assert!(status.success());
    let d = discover_ok(&t.path().join("p"));
    println!("{}", render(&d));
}

#[test]
fn deep_yaml() {
    let t = project();
    std::fs::create_dir_all(t.path().join("p/agent/skills")).unwrap();
    let deep = format!(
        "---\ndescription: {}1{}\n---\nbody\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    std::fs::write(t.path().join("p/agent/skills/s.md"), &deep).unwrap();
    let deep = format!(
        "---\ndescription: x\n{}\n---\nbody\n",
        (0..10_000)
            .map(|i| format!("{}a:", " ".repeat(i)))
            .collect::<Vec<_>>()
            .join("\n")
    );
    std::fs::write(t.path().join("p/agent/skills/t.md"), &deep).unwrap();
    let d = discover_ok(&t.path().join("p"));
    println!("{}", render(&d));
}

#[test]
fn deep_json() {
    let t = project();
    std::fs::write(
        t.path().join("p/agent/tools/x.toml"),
        "description = \"x\"\ncommand = [\"true\"]\ninput_schema_file = \"s.json\"\n",
    )
    .unwrap();
    let deep = format!(
        "{{\"type\":\"object\",\"x\":{}1{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    std::fs::write(t.path().join("p/agent/tools/s.json"), &deep).unwrap();
    let mut s = String::from("{\"type\":\"object\"");
    for _ in 0..120 {
        s.push_str(",\"properties\":{\"a\":{\"type\":\"object\"");
    }
    for _ in 0..120 {
        s.push_str("}}");
    }
    s.push('}');
    std::fs::write(
        t.path().join("p/agent/tools/y.toml"),
        "description = \"x\"\ncommand = [\"true\"]\ninput_schema_file = \"t.json\"\n",
    )
    .unwrap();
    std::fs::write(t.path().join("p/agent/tools/t.json"), &s).unwrap();
    let d = discover_ok(&t.path().join("p"));
    println!("{}", render(&d));
}

fn yaml_case(n: usize, text: String) {
    let t = project();
    std::fs::create_dir_all(t.path().join("p/agent/skills")).unwrap();
    std::fs::write(t.path().join("p/agent/skills/s.md"), &text).unwrap();
    let start = std::time::Instant::now();
    let d = discover_ok(&t.path().join("p"));
    println!("{n}: {:?} {}", start.elapsed(), render(&d));
}

#[test]
fn yaml_seq() {
    for n in [100, 1000, 5000, 20000] {
        yaml_case(n, format!("---\ndescription: x\nother: {}1{}\n---\nbody\n", "[".repeat(n), "]".repeat(n)));
    }
}
#[test]
fn yaml_map() {
    for n in [100, 1000, 5000, 20000] {
        yaml_case(n, format!("---\ndescription: x\nother: {}1{}\n---\nbody\n", "{a: ".repeat(n), "}".repeat(n)));
    }
}
#[test]
fn yaml_indent() {
    for n in [100, 500, 1500] {
        yaml_case(n, format!("---\ndescription: x\n{}\n---\nbody\n", (0..n).map(|i| format!("{}a:", " ".repeat(i))).collect::<Vec<_>>().join("\n")));
    }
}

#[allow(dead_code)]
fn deep_yaml_ignored() {
    let t = project();
    std::fs::create_dir_all(t.path().join("p/agent/skills")).unwrap();
    let deep = format!(
        "---\ndescription: x\nother: {}1{}\n---\nbody\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    std::fs::write(t.path().join("p/agent/skills/s.md"), &deep).unwrap();
    let deep = format!(
        "---\ndescription: x\nother: {}1{}\n---\nbody\n",
        "{a: ".repeat(100_000),
        "}".repeat(100_000)
    );
    std::fs::write(t.path().join("p/agent/skills/u.md"), &deep).unwrap();
    let deep = format!(
        "---\ndescription: x\n{}\n---\nbody\n",
        (0..1500)
            .map(|i| format!("{}a:", " ".repeat(i)))
            .collect::<Vec<_>>()
            .join("\n")
    );
    std::fs::write(t.path().join("p/agent/skills/t.md"), &deep).unwrap();
    let d = discover_ok(&t.path().join("p"));
    println!("{}", render(&d));
}
