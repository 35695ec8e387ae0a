// The /docs pages are rendered by the server (pulldown-cmark); this script
// only highlights their code blocks, with the playground's highlighter.

import { highlight } from "./highlight";

for (const code of document.querySelectorAll<HTMLElement>("pre > code")) {
  const lang = [...code.classList].find((c) => c.startsWith("language-"))?.slice("language-".length);
  code.innerHTML = highlight(code.textContent ?? "", lang);
  code.classList.add("hljs");
}
