// Markdown of model replies to HTML: `marked` for the syntax, highlight.ts
// for code blocks. A reply is untrusted text:
// raw HTML in it is shown as text, and links keep only safe schemes (the
// page's Content-Security-Policy forbids inline script besides).

import { Marked, type Tokens } from "marked";
import { escapeHtml, highlight } from "./highlight";

export { escapeHtml };

/** Only these schemes become links; anything else (`javascript:`, `data:`) renders as text. */
export function safeHref(href: string): string | null {
  const h = href.trim();
  if (/^(https?:|mailto:)/i.test(h)) return h;
  if (/^[a-z][a-z0-9+.-]*:/i.test(h)) return null;
  return h;
}

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: {
    html(token: Tokens.HTML | Tokens.Tag) {
      return escapeHtml(token.text);
    },
    code(token: Tokens.Code) {
      const lang = token.lang ? escapeHtml(token.lang.split(/\s+/)[0]) : "";
      const cls = lang ? ` class="hljs language-${lang}"` : ` class="hljs"`;
      return `<pre><code${cls}>${highlight(token.text, token.lang)}</code></pre>\n`;
    },
    link(token: Tokens.Link) {
      const text = this.parser.parseInline(token.tokens);
      const href = safeHref(token.href);
      if (href === null) return text;
      const title = token.title ? ` title="${escapeHtml(token.title)}"` : "";
      return `<a href="${escapeHtml(href)}"${title} target="_blank" rel="noopener noreferrer">${text}</a>`;
    },
    image(token: Tokens.Image) {
      // Remote images would leak the reader's address; show the alt text.
      return escapeHtml(token.text || token.href);
    },
  },
});

/** Markdown to HTML, safe to set as innerHTML. */
export function renderMarkdown(src: string): string {
  return marked.parse(src, { async: false }) as string;
}
