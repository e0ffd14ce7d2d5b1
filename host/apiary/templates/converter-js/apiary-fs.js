// apiary-fs.js: files for a JavaScript converter. apiary preopens the input tree read-only at
// `/input` and, for `convert`, an empty `/output`; JavaScript reaches them through the WASI
// filesystem imports this project's world adds (wit/world.wit). Paths are `/`-separated and
// relative to the directory; WASI itself refuses `..` or a link out of a preopened directory.

import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

/// Bytes read from one file at most: input trees are untrusted.
const MAX_FILE = 8 << 20;

/// The preopened directory `path` (`/input` or `/output`).
export function dir(path) {
  for (const [descriptor, at] of getDirectories()) {
    if (at === path) return descriptor;
  }
  throw `${path} is not available to this call`;
}

function failed(what, path, e) {
  // A failed WASI call throws with the error code (`no-entry`, `not-permitted`, ...) as payload.
  return `cannot ${what} ${path}: ${e?.payload ?? e}`;
}

/// Every regular file under `root`, as sorted relative paths; links are not followed.
export function files(root, prefix = "") {
  const found = [];
  const at = prefix ? open(root, prefix, { directory: true }) : root;
  let stream;
  try {
    stream = at.readDirectory();
  } catch (e) {
    throw failed("list", prefix || ".", e);
  }
  for (let entry; (entry = stream.readDirectoryEntry()); ) {
    const path = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.type === "directory") found.push(...files(root, path));
    else if (entry.type === "regular-file") found.push(path);
  }
  return found.sort();
}

function open(root, path, openFlags, flags = { read: true }) {
  try {
    return root.openAt({}, path, openFlags, flags);
  } catch (e) {
    throw failed("open", path, e);
  }
}

/// The text of the file `path` under `root` (UTF-8).
export function readText(root, path) {
  const file = open(root, path, {});
  const chunks = [];
  let size = 0;
  for (;;) {
    const [bytes, end] = file.read(65536n, BigInt(size));
    chunks.push(bytes);
    size += bytes.length;
    if (size > MAX_FILE) throw `${path} is larger than ${MAX_FILE} bytes`;
    if (end || bytes.length === 0) break;
  }
  const all = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    all.set(chunk, offset);
    offset += chunk.length;
  }
  return new TextDecoder().decode(all);
}

/// Writes `text` to `path` under `root`, creating its parent directories.
export function writeText(root, path, text) {
  const parts = path.split("/");
  for (let i = 1; i < parts.length; i++) {
    try {
      root.createDirectoryAt(parts.slice(0, i).join("/"));
    } catch (e) {
      if (e?.payload !== "exist") throw failed("create", parts.slice(0, i).join("/"), e);
    }
  }
  const file = open(root, path, { create: true, truncate: true }, { write: true });
  const bytes = new TextEncoder().encode(text);
  let offset = 0;
  while (offset < bytes.length) {
    try {
      offset += Number(file.write(bytes.subarray(offset), BigInt(offset)));
    } catch (e) {
      throw failed("write", path, e);
    }
  }
}
