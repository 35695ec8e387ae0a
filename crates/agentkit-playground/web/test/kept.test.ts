import { describe, expect, it } from "vitest";
import { appendPage, bytes, isImage, times, uploadPath } from "../src/kept";

describe("kept", () => {
  it("recognises image paths by extension", () => {
    expect(isImage("shots/a.PNG")).toBe(true);
    expect(isImage("a.webp")).toBe(true);
    expect(isImage("notes/a.txt")).toBe(false);
    expect(isImage("img.png/readme")).toBe(false);
    expect(isImage("png")).toBe(false);
  });

  it("formats sizes", () => {
    expect(bytes(5)).toBe("5 B");
    expect(bytes(1536)).toBe("1.5 KiB");
    expect(bytes(2 * 1024 * 1024)).toBe("2.0 MiB");
  });

  it("joins an upload's folder and name", () => {
    expect(uploadPath("", "a.png")).toBe("a.png");
    expect(uploadPath("/inbox//shots/", "a.png")).toBe("inbox/shots/a.png");
    expect(() => uploadPath("..", "a.png")).toThrow(/inside the workspace/);
    expect(() => uploadPath("a/./b", "a.png")).toThrow(/\. or \.\./);
  });

  it("appends a page without duplicates", () => {
    const listed = [{ id: "a" }, { id: "b" }];
    expect(appendPage(listed, [{ id: "b" }, { id: "c" }]).map((t) => t.id)).toEqual(["a", "b", "c"]);
    expect(appendPage([{ path: "x" }], [{ path: "x" }, { path: "y" }]).map((t) => t.path)).toEqual(["x", "y"]);
  });

  it("shows the update time only when it differs", () => {
    expect(times("2026-03-02T12:00:00Z", "2026-03-02T12:00:00Z")).not.toContain("updated");
    expect(times("2026-03-02T12:00:00Z", "2026-03-02T12:05:00Z")).toContain("updated");
    expect(times("not a time")).toBe("created not a time");
  });
});
