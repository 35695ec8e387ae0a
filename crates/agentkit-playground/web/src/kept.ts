// Pure helpers of the views of what an agent keeps: artifacts, memory and a
// session's workspace files (docs/reference/artifacts.md, memory.md, files.md).

/** The extensions the server serves as images (docs/reference/files.md). */
const IMAGE_EXTENSIONS = ["png", "jpg", "jpeg", "gif", "webp", "svg"];

/** Whether a workspace path is shown as an inline image. */
export function isImage(path: string): boolean {
  const dot = path.lastIndexOf(".");
  if (dot < 0 || dot < path.lastIndexOf("/")) return false;
  return IMAGE_EXTENSIONS.includes(path.slice(dot + 1).toLowerCase());
}

/** A byte count for people: `512 B`, `1.5 KiB`, `2.0 MiB`. */
export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1024 * 1024)).toFixed(1)} MiB`;
}

/**
 * The path an upload lands at: `folder/name`, without leading or doubled
 * slashes. A `.` or `..` segment throws: a browser resolves dot segments of
 * a URL before sending it, so the file would land elsewhere than asked (the
 * server refuses a path leaving the workspace in any case).
 */
export function uploadPath(folder: string, name: string): string {
  const parts = [...folder.split("/"), name].map((p) => p.trim()).filter((p) => p !== "");
  if (parts.some((p) => p === "." || p === "..")) {
    throw new Error(`bad_request: ${parts.join("/")} has a . or .. segment; give a path inside the workspace`);
  }
  return parts.join("/");
}

/** Appends a page to what is listed, dropping items already there (by `id` or `path`). */
export function appendPage<T extends { id?: string; path?: string }>(listed: T[], page: T[]): T[] {
  const key = (t: T) => t.id ?? t.path ?? "";
  const seen = new Set(listed.map(key));
  return [...listed, ...page.filter((t) => !seen.has(key(t)))];
}

/** "created X" and, when different, "· updated Y", in the browser's locale. */
export function times(createdAt: string, updatedAt?: string): string {
  const at = (s: string) => {
    const d = new Date(s);
    return Number.isNaN(d.getTime()) ? s : d.toLocaleString();
  };
  const created = `created ${at(createdAt)}`;
  return updatedAt && updatedAt !== createdAt ? `${created} · updated ${at(updatedAt)}` : created;
}
