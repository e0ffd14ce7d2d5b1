//! A generic KDL node (name, positional arguments, properties, children) parsed with the `kdl`
//! crate (KDL v2, as agent-compose writes), rendered back to KDL, and carried as JSON in the
//! persona pack's extension block so that nothing of a role or personality is dropped.

use kdl::{KdlDocument, KdlEntry, KdlNode, KdlValue};
use serde_json::{Map, Value};

/// Deepest `{` nesting accepted: agent-compose files use three levels; the parser recurses, so a
/// hostile file must be refused before it reaches it.
pub const MAX_DEPTH: usize = 32;
/// Largest KDL file read.
pub const MAX_KDL_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Node {
    pub name: String,
    pub args: Vec<Value>,
    /// Properties in file order; a repeated key keeps its last value (KDL's rule).
    pub props: Map<String, Value>,
    pub children: Vec<Node>,
}

impl Node {
    pub fn new(name: &str) -> Node {
        Node {
            name: name.to_string(),
            ..Node::default()
        }
    }

    pub fn arg(mut self, value: impl Into<Value>) -> Node {
        self.args.push(value.into());
        self
    }

    pub fn prop(mut self, key: &str, value: impl Into<Value>) -> Node {
        self.props.insert(key.to_string(), value.into());
        self
    }

    pub fn child(mut self, node: Node) -> Node {
        self.children.push(node);
        self
    }

    /// The first argument as a string.
    pub fn arg0(&self) -> Option<&str> {
        self.args.first().and_then(Value::as_str)
    }

    /// Every argument that is a string.
    pub fn str_args(&self) -> Vec<&str> {
        self.args.iter().filter_map(Value::as_str).collect()
    }

    pub fn str_prop(&self, key: &str) -> Option<&str> {
        self.props.get(key).and_then(Value::as_str)
    }

    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    pub fn first_child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    /// The first string argument of the first child called `name`.
    pub fn child_arg(&self, name: &str) -> Option<&str> {
        self.first_child(name).and_then(Node::arg0)
    }

    /// Replaces every child called `name` with `node` (at the first one's place, else appended
    /// after the child called `after` when there is one, else at the end).
    pub fn set_child(&mut self, node: Node, after: &[&str]) {
        if let Some(i) = self.children.iter().position(|c| c.name == node.name) {
            let name = node.name.clone();
            self.children[i] = node;
            let mut seen = false;
            self.children.retain(|c| {
                if c.name != name {
                    return true;
                }
                let keep = !seen;
                seen = true;
                keep
            });
            return;
        }
        self.add_child(node, after);
    }

    /// Inserts `node` after the last child named in `after` (the latest such position), else at
    /// the end.
    pub fn add_child(&mut self, node: Node, after: &[&str]) {
        let at = after
            .iter()
            .filter_map(|a| self.children.iter().rposition(|c| c.name == *a))
            .max()
            .map(|i| i + 1)
            .unwrap_or(self.children.len());
        self.children.insert(at, node);
    }

    pub fn remove_children(&mut self, name: &str) {
        self.children.retain(|c| c.name != name);
    }

    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("name".into(), self.name.clone().into());
        if !self.args.is_empty() {
            map.insert("args".into(), Value::Array(self.args.clone()));
        }
        if !self.props.is_empty() {
            map.insert("props".into(), Value::Object(self.props.clone()));
        }
        if !self.children.is_empty() {
            let children = self.children.iter().map(Node::to_json).collect();
            map.insert("children".into(), Value::Array(children));
        }
        Value::Object(map)
    }

    /// Reads a node back from [`Node::to_json`]'s shape; `depth` bounds hostile nesting.
    pub fn from_json(value: &Value) -> Result<Node, String> {
        from_json_at(value, 0)
    }
}

fn from_json_at(value: &Value, depth: usize) -> Result<Node, String> {
    if depth > MAX_DEPTH {
        return Err(format!("node nesting deeper than {MAX_DEPTH}"));
    }
    let map = value.as_object().ok_or("a node is not a JSON object")?;
    let name = map
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("a node has no `name`")?;
    let scalar = |v: &Value| -> Result<Value, String> {
        match v {
            Value::Array(_) | Value::Object(_) => {
                Err(format!("node `{name}`: a KDL value must be a scalar"))
            }
            other => Ok(other.clone()),
        }
    };
    let args = match map.get("args") {
        None => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(scalar).collect::<Result<_, _>>()?,
        Some(_) => return Err(format!("node `{name}`: `args` is not a list")),
    };
    let props = match map.get("props") {
        None => Map::new(),
        Some(Value::Object(p)) => p
            .iter()
            .map(|(k, v)| Ok((k.clone(), scalar(v)?)))
            .collect::<Result<_, String>>()?,
        Some(_) => return Err(format!("node `{name}`: `props` is not an object")),
    };
    let children = match map.get("children") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|c| from_json_at(c, depth + 1))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(format!("node `{name}`: `children` is not a list")),
    };
    Ok(Node {
        name: name.to_string(),
        args,
        props,
        children,
    })
}

/// The deepest `{` nesting of a KDL text, counted outside strings and comments (quoted,
/// multi-line `"""`, raw `#"…"#` strings, `//` and nested `/* */` comments). Braces inside a
/// slashdashed node still count: an over-estimate only refuses earlier.
fn brace_depth(text: &str) -> usize {
    let b = text.as_bytes();
    let at = |i: usize, pat: &[u8]| b.get(i..i + pat.len()) == Some(pat);
    let (mut depth, mut max, mut i) = (0usize, 0usize, 0usize);
    while i < b.len() {
        if b[i] == b'#' || b[i] == b'"' {
            // Raw strings: n hashes, then `"` or `"""`; closed by the same quote and n hashes.
            let hashes = b[i..].iter().take_while(|c| **c == b'#').count();
            let q = i + hashes;
            if b.get(q) != Some(&b'"') {
                i = q.max(i + 1);
                continue;
            }
            let quote: &[u8] = if at(q, b"\"\"\"") { b"\"\"\"" } else { b"\"" };
            let mut j = q + quote.len();
            loop {
                if j >= b.len() {
                    return max;
                }
                if hashes == 0 && b[j] == b'\\' {
                    j += 2;
                    continue;
                }
                if at(j, quote)
                    && b[j + quote.len()..]
                        .iter()
                        .take_while(|c| **c == b'#')
                        .count()
                        >= hashes
                {
                    j += quote.len() + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            continue;
        }
        if at(i, b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if at(i, b"/*") {
            let mut level = 0usize;
            while i < b.len() {
                if at(i, b"/*") {
                    level += 1;
                    i += 2;
                } else if at(i, b"*/") {
                    level -= 1;
                    i += 2;
                    if level == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            continue;
        }
        match b[i] {
            b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    max
}

/// Parses a KDL v2 document into generic nodes. Refuses oversize input and deep nesting before
/// the parser sees it.
pub fn parse(text: &str, path: &str) -> Result<Vec<Node>, String> {
    if text.len() > MAX_KDL_BYTES {
        return Err(format!("{path}: larger than {MAX_KDL_BYTES} bytes"));
    }
    if brace_depth(text) > MAX_DEPTH {
        return Err(format!(
            "{path}: KDL nesting deeper than {MAX_DEPTH} levels is refused"
        ));
    }
    let doc = KdlDocument::parse_v2(text).map_err(|e| {
        let detail = e
            .diagnostics
            .first()
            .map(|d| {
                let what = d.message.clone().unwrap_or_else(|| "syntax error".into());
                format!("{what} at byte {}", d.span.offset())
            })
            .unwrap_or_else(|| "syntax error".into());
        format!("{path}: not valid KDL v2: {detail}")
    })?;
    doc.nodes().iter().map(|n| from_kdl(n, path, 0)).collect()
}

fn value_to_json(value: &KdlValue) -> Value {
    match value {
        KdlValue::String(s) => Value::String(s.clone()),
        KdlValue::Integer(i) => i64::try_from(*i)
            .map(Value::from)
            .unwrap_or_else(|_| Value::String(i.to_string())),
        KdlValue::Float(f) => serde_json::Number::from_f64(*f)
            .map(Value::Number)
            .unwrap_or_else(|| Value::String(f.to_string())),
        KdlValue::Bool(b) => Value::Bool(*b),
        KdlValue::Null => Value::Null,
    }
}

fn from_kdl(node: &KdlNode, path: &str, depth: usize) -> Result<Node, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "{path}: KDL nesting deeper than {MAX_DEPTH} levels"
        ));
    }
    let name = node.name().value().to_string();
    if node.ty().is_some() || node.entries().iter().any(|e| e.ty().is_some()) {
        return Err(format!(
            "{path}: node `{name}` uses a type annotation, which agent-compose does not define"
        ));
    }
    let mut out = Node::new(&name);
    for entry in node.entries() {
        let value = value_to_json(entry.value());
        match entry.name() {
            Some(key) => {
                out.props.shift_remove(key.value());
                out.props.insert(key.value().to_string(), value);
            }
            None => out.args.push(value),
        }
    }
    if let Some(children) = node.children() {
        for child in children.nodes() {
            out.children.push(from_kdl(child, path, depth + 1)?);
        }
    }
    Ok(out)
}

fn json_to_value(value: &Value) -> KdlValue {
    match value {
        Value::String(s) => KdlValue::String(s.clone()),
        Value::Bool(b) => KdlValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => KdlValue::Integer(i128::from(i)),
            None => KdlValue::Float(n.as_f64().unwrap_or_default()),
        },
        // Only scalars reach here (see `from_json`); anything else is written as text.
        Value::Null => KdlValue::Null,
        other => KdlValue::String(other.to_string()),
    }
}

fn to_kdl(node: &Node) -> KdlNode {
    let mut out = KdlNode::new(node.name.as_str());
    for arg in &node.args {
        out.push(KdlEntry::new(json_to_value(arg)));
    }
    for (key, value) in &node.props {
        out.push(KdlEntry::new_prop(key.as_str(), json_to_value(value)));
    }
    if !node.children.is_empty() {
        let doc = out.ensure_children();
        for child in &node.children {
            doc.nodes_mut().push(to_kdl(child));
        }
    }
    out
}

/// Renders nodes as a KDL v2 document (four-space indent, trailing newline).
pub fn render(nodes: &[Node]) -> String {
    let mut doc = KdlDocument::new();
    for node in nodes {
        doc.nodes_mut().push(to_kdl(node));
    }
    doc.autoformat();
    let mut text = doc.to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_v2_and_round_trips() {
        let text = "personality \"t\" skill=\"personality-t\" color=\"#8f8c47\" {\n    order 21\n    emblem { name \"g\"; emoji \"⛏️\"; glyph \"⟐\" }\n    verb \"A\" \"B\"\n}\nsource \"x\" required=#true\n";
        let nodes = parse(text, "t.kdl").unwrap();
        assert_eq!(nodes[0].str_prop("color"), Some("#8f8c47"));
        assert_eq!(nodes[0].children[1].children[1].arg0(), Some("⛏️"));
        assert_eq!(nodes[1].props["required"], Value::Bool(true));
        let again = parse(&render(&nodes), "again.kdl").unwrap();
        assert_eq!(again, nodes);
        let json = Node::from_json(&nodes[0].to_json()).unwrap();
        assert_eq!(json, nodes[0]);
    }

    #[test]
    fn refuses_deep_nesting_and_bad_syntax() {
        let deep = "a {".repeat(200) + &"}".repeat(200);
        assert!(parse(&deep, "d.kdl").unwrap_err().contains("nesting"));
        assert!(parse("role \"x\" {", "b.kdl").is_err());
        assert!(parse("role true", "v1.kdl").is_err());
    }

    #[test]
    fn multiline_strings_dedent() {
        let text =
            "role \"b\" {\n    briefing \"\"\"\n        One.\n\n        Two.\n        \"\"\"\n}\n";
        let nodes = parse(text, "r.kdl").unwrap();
        assert_eq!(nodes[0].child_arg("briefing"), Some("One.\n\nTwo."));
        let again = parse(&render(&nodes), "r2.kdl").unwrap();
        assert_eq!(again, nodes);
    }
}
