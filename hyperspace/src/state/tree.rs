//! The namespace of the state machine: path checks and the tree of directories and files with
//! their attributes and per-node lock state. Pure data; events and handles live in the parent.

use std::collections::{BTreeMap, BTreeSet};

use super::locks::NodeLock;

/// A directory or file.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Node {
    pub is_dir: bool,
    /// Created by an open with `TEMP`: deleted when its last handle closes.
    pub ephemeral: bool,
    pub attrs: BTreeMap<String, Vec<u8>>,
    /// Names of the children (directories only). Derived from the paths; rebuilt on restore.
    pub children: BTreeSet<String>,
    /// Live handles open on this node. Derived from the handles; rebuilt on restore.
    pub handles: BTreeSet<u64>,
    pub lock: NodeLock,
}

impl Node {
    pub fn dir() -> Self {
        Self {
            is_dir: true,
            ..Self::default()
        }
    }

    pub fn file(ephemeral: bool, attrs: BTreeMap<String, Vec<u8>>) -> Self {
        Self {
            is_dir: false,
            ephemeral,
            attrs,
            ..Self::default()
        }
    }
}

/// All nodes by absolute path. Keyed by the whole path (not nested) so lookups are one map
/// access and iteration order (hence snapshots) is the sorted path order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Tree {
    pub nodes: BTreeMap<String, Node>,
}

impl Default for Tree {
    fn default() -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert("/".to_string(), Node::dir());
        Self { nodes }
    }
}

impl Tree {
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    pub fn get_mut(&mut self, path: &str) -> Option<&mut Node> {
        self.nodes.get_mut(path)
    }

    /// Inserts `node` at `path` and links it into its parent. The caller checked that the parent
    /// is a directory and `path` is free.
    pub fn insert(&mut self, path: &str, node: Node) {
        if let Some((parent, name)) = split_parent(path)
            && let Some(p) = self.nodes.get_mut(parent)
        {
            p.children.insert(name.to_string());
        }
        self.nodes.insert(path.to_string(), node);
    }

    /// Unlinks and returns the node at `path` (the caller checked it has no children).
    pub fn remove(&mut self, path: &str) -> Option<Node> {
        let node = self.nodes.remove(path)?;
        if let Some((parent, name)) = split_parent(path)
            && let Some(p) = self.nodes.get_mut(parent)
        {
            p.children.remove(name);
        }
        Some(node)
    }
}

/// Checks a path's syntax: absolute, '/'-separated, no empty, "." or ".." components, no NUL,
/// no trailing '/' except the root, at most `max_bytes` long. The error says what is wrong.
pub(crate) fn check_path(path: &str, max_bytes: usize) -> Result<(), String> {
    let shown = shorten(path);
    if path.len() > max_bytes {
        return Err(format!(
            "path {shown:?} is {} bytes, more than the limit of {max_bytes}",
            path.len()
        ));
    }
    if !path.starts_with('/') {
        return Err(format!("path {shown:?} is not absolute"));
    }
    if path.contains('\0') {
        return Err(format!("path {shown:?} contains a NUL byte"));
    }
    if path == "/" {
        return Ok(());
    }
    for comp in path[1..].split('/') {
        match comp {
            "" => return Err(format!("path {shown:?} has an empty component")),
            "." | ".." => return Err(format!("path {shown:?} has a {comp:?} component")),
            _ => {}
        }
    }
    Ok(())
}

/// A path cut to a readable length for error messages (they are cached and replicated, so a
/// megabyte-long bad path must not end up in one).
pub(crate) fn shorten(s: &str) -> &str {
    const MAX: usize = 200;
    if s.len() <= MAX {
        return s;
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// `(parent path, last component)` of a checked path; `None` for the root.
pub(crate) fn split_parent(path: &str) -> Option<(&str, &str)> {
    if path == "/" {
        return None;
    }
    let i = path.rfind('/')?;
    let parent = if i == 0 { "/" } else { &path[..i] };
    Some((parent, &path[i + 1..]))
}

/// The proper ancestors of a checked path, from the root down (excluding the path itself).
pub(crate) fn ancestors(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut cur = path;
    while let Some((parent, _)) = split_parent(cur) {
        out.push(parent);
        cur = parent;
    }
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_rules() {
        for ok in ["/", "/a", "/a/b", "/a.b/..c/d..", "/ü/x"] {
            assert_eq!(check_path(ok, 4096), Ok(()), "{ok}");
        }
        for bad in [
            "", "a", "a/b", "//", "/a/", "/a//b", "/./a", "/a/..", "/a\0b", "/a/.",
        ] {
            let err = check_path(bad, 4096).unwrap_err();
            assert!(err.contains("path"), "{bad:?}: {err}");
        }
        assert!(check_path("/abcd", 5).is_ok());
        assert!(check_path("/abcde", 5).unwrap_err().contains("limit"));
    }

    #[test]
    fn parents() {
        assert_eq!(split_parent("/"), None);
        assert_eq!(split_parent("/a"), Some(("/", "a")));
        assert_eq!(split_parent("/a/b"), Some(("/a", "b")));
        assert_eq!(ancestors("/a/b/c"), vec!["/", "/a", "/a/b"]);
        assert_eq!(ancestors("/"), Vec::<&str>::new());
        let long = "é".repeat(300);
        assert!(shorten(&long).len() <= 200);
    }
}
