//! The layout of `serde_json::to_writer_pretty` (two-space indent), with each line break and its
//! indent written in one call rather than one call per level. `pack inspect --json` of a large pack
//! writes ~20,000 keys, most of them four or five levels deep, and serde_json's own formatter writes
//! each indent level separately. The tests compare both byte for byte.

use std::io::{self, Write};

use serde_json::ser::Formatter;

/// A line break followed by enough indent for [`FAST_DEPTH`] levels; deeper levels fall back to a
/// loop.
const BREAK: &[u8] = b"\n                                ";
const FAST_DEPTH: usize = (BREAK.len() - 1) / 2;

#[derive(Default)]
pub struct Pretty {
    depth: usize,
    has_value: bool,
}

impl Pretty {
    /// Writes `,` when not `first`, then a line break indented to the current depth.
    fn line<W: ?Sized + Write>(&self, out: &mut W, first: bool, depth: usize) -> io::Result<()> {
        if !first {
            out.write_all(b",")?;
        }
        if depth <= FAST_DEPTH {
            out.write_all(&BREAK[..1 + 2 * depth])
        } else {
            out.write_all(BREAK)?;
            (FAST_DEPTH..depth).try_for_each(|_| out.write_all(b"  "))
        }
    }

    fn open<W: ?Sized + Write>(&mut self, out: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        out.write_all(bracket)
    }

    fn close<W: ?Sized + Write>(&mut self, out: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.line(out, true, self.depth)?;
        }
        out.write_all(bracket)
    }
}

impl Formatter for Pretty {
    fn begin_array<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.open(out, b"[")
    }

    fn end_array<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.close(out, b"]")
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, out: &mut W, first: bool) -> io::Result<()> {
        self.line(out, first, self.depth)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, _out: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.open(out, b"{")
    }

    fn end_object<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        self.close(out, b"}")
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, out: &mut W, first: bool) -> io::Result<()> {
        self.line(out, first, self.depth)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, out: &mut W) -> io::Result<()> {
        out.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, _out: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// `value` as pretty JSON into `out`.
pub fn write<W: Write>(out: W, value: &impl serde::Serialize) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(
        out,
        Pretty::default(),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn assert_same(value: &serde_json::Value) {
        let mut ours = Vec::new();
        super::write(&mut ours, value).unwrap();
        let theirs = serde_json::to_vec_pretty(value).unwrap();
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            String::from_utf8(theirs).unwrap()
        );
    }

    #[test]
    fn same_layout_as_serde_json() {
        for value in [
            json!(null),
            json!("text"),
            json!([]),
            json!({}),
            json!([[]]),
            json!({"a": {}}),
            json!({"a": [], "b": [{}], "c": [[], {}, 1]}),
            json!({"a": 1, "b": [1, 2, {"c": null, "d": "e\n\"f\""}], "g": {"h": true}}),
            json!([{"x": [1, {"y": [{"z": []}]}]}, "s", 2.5, -3]),
        ] {
            assert_same(&value);
        }
    }

    #[test]
    fn deep_nesting_past_the_fast_indent() {
        // Depths around FAST_DEPTH and well past it, through arrays and objects alike.
        for depth in [
            super::FAST_DEPTH - 1,
            super::FAST_DEPTH,
            super::FAST_DEPTH + 1,
            40,
        ] {
            let mut value = json!({"leaf": [1, 2], "empty": {}});
            for level in 0..depth {
                value = if level % 2 == 0 {
                    json!([value, level])
                } else {
                    json!({"k": value, "n": level})
                };
            }
            assert_same(&value);
        }
    }
}
