//! The metadata server's namespace as a pure state machine: directories, files, their blocks
//! and chunk ids, changed only by [`Op`]s (the records of the op log). No I/O, no clocks: the
//! server logs an op after [`Namespace::apply`] accepted it, and a restart replays the same
//! ops onto the last checkpoint.

use std::collections::{BTreeMap, HashMap};

use dfs_broker::{FsError, FsResult, check_path};
use serde::{Deserialize, Serialize};

use crate::Layout;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockMeta {
    pub id: u64,
    /// Logical file bytes in the block.
    pub len: u64,
    pub layout: Layout,
    /// Chunk ids: one for a replicated block, `data + parity` for a striped one.
    pub chunks: Vec<u64>,
    pub complete: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileMeta {
    /// Also the writer's lease: only the holder of the current id appends.
    pub id: u64,
    pub blocks: Vec<BlockMeta>,
    pub open: bool,
}

impl FileMeta {
    pub fn length(&self) -> u64 {
        self.blocks.iter().map(|b| b.len).sum()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Entry {
    Dir,
    File(FileMeta),
}

/// A change of the namespace: one record of the op log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    Mkdirs {
        path: String,
    },
    Create {
        path: String,
        file_id: u64,
        overwrite: bool,
    },
    /// Appends a block to an open file; the previous last block is complete.
    AddBlock {
        file_id: u64,
        block: BlockMeta,
    },
    /// The writer's acknowledged length of its last block.
    SetLength {
        file_id: u64,
        block_id: u64,
        len: u64,
        complete: bool,
    },
    Close {
        file_id: u64,
    },
    Remove {
        path: String,
    },
    Rmdir {
        path: String,
        recursive: bool,
    },
    Rename {
        from: String,
        to: String,
    },
}

/// What an op freed: chunks no file owns any more.
#[derive(Debug, Default)]
pub struct Applied {
    pub freed_chunks: Vec<u64>,
}

/// Directories and files by full path.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Namespace {
    entries: BTreeMap<String, Entry>,
    /// The next id to hand out (files, blocks and chunks share one sequence).
    next_id: u64,
    #[serde(skip)]
    by_id: HashMap<u64, String>,
    /// Chunk id -> (file id, block id).
    #[serde(skip)]
    chunk_owner: HashMap<u64, (u64, u64)>,
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

fn child_prefix(dir: &str) -> String {
    if dir == "/" {
        "/".to_string()
    } else {
        format!("{dir}/")
    }
}

fn not_found(op: &'static str, path: &str) -> FsError {
    FsError::NotFound {
        op,
        path: path.to_string(),
    }
}

impl Namespace {
    pub fn new() -> Self {
        Self {
            next_id: 1,
            ..Default::default()
        }
    }

    /// Rebuilds the indexes after deserializing a checkpoint.
    pub fn reindex(&mut self) {
        self.by_id.clear();
        self.chunk_owner.clear();
        for (path, e) in &self.entries {
            if let Entry::File(f) = e {
                self.by_id.insert(f.id, path.clone());
                for b in &f.blocks {
                    for c in &b.chunks {
                        self.chunk_owner.insert(*c, (f.id, b.id));
                    }
                }
            }
        }
    }

    /// Hands out `n` fresh consecutive ids (not logged: the op that uses them is).
    pub fn alloc_ids(&mut self, n: u64) -> u64 {
        let first = self.next_id.max(1);
        self.next_id = first + n;
        first
    }

    pub fn get(&self, path: &str) -> Option<&Entry> {
        if path == "/" {
            return Some(&Entry::Dir);
        }
        self.entries.get(path)
    }

    pub fn file_by_id(&self, id: u64) -> Option<(&str, &FileMeta)> {
        let path = self.by_id.get(&id)?;
        match self.entries.get(path) {
            Some(Entry::File(f)) => Some((path.as_str(), f)),
            _ => None,
        }
    }

    /// The file and block owning a chunk.
    pub fn chunk_owner(&self, chunk: u64) -> Option<(u64, u64)> {
        self.chunk_owner.get(&chunk).copied()
    }

    pub fn block(&self, file_id: u64, block_id: u64) -> Option<&BlockMeta> {
        self.file_by_id(file_id)?
            .1
            .blocks
            .iter()
            .find(|b| b.id == block_id)
    }

    pub fn files(&self) -> impl Iterator<Item = (&str, &FileMeta)> {
        self.entries.iter().filter_map(|(p, e)| match e {
            Entry::File(f) => Some((p.as_str(), f)),
            Entry::Dir => None,
        })
    }

    /// The direct children of a directory, sorted by name.
    pub fn readdir(&self, path: &str) -> FsResult<Vec<dfs_broker::DirEntry>> {
        check_path("readdir", path)?;
        match self.get(path) {
            None => return Err(not_found("readdir", path)),
            Some(Entry::File(_)) => {
                return Err(FsError::NotADirectory {
                    op: "readdir",
                    path: path.to_string(),
                });
            }
            Some(Entry::Dir) => {}
        }
        let prefix = child_prefix(path);
        let mut out = Vec::new();
        for (p, e) in self.entries.range(prefix.clone()..) {
            let Some(name) = p.strip_prefix(&prefix) else {
                break;
            };
            if name.contains('/') {
                continue;
            }
            out.push(match e {
                Entry::Dir => dfs_broker::DirEntry {
                    name: name.to_string(),
                    is_dir: true,
                    length: 0,
                },
                Entry::File(f) => dfs_broker::DirEntry {
                    name: name.to_string(),
                    is_dir: false,
                    length: f.length(),
                },
            });
        }
        out.sort();
        Ok(out)
    }

    /// Checks that every ancestor of `path` is a directory or absent.
    fn check_ancestors(&self, op: &'static str, path: &str) -> FsResult<()> {
        let mut p = parent(path);
        loop {
            if let Some(Entry::File(_)) = self.get(p) {
                return Err(FsError::NotADirectory {
                    op,
                    path: p.to_string(),
                });
            }
            if p == "/" {
                return Ok(());
            }
            p = parent(p);
        }
    }

    fn make_parents(&mut self, path: &str) {
        let mut p = parent(path).to_string();
        while p != "/" && !self.entries.contains_key(&p) {
            self.entries.insert(p.clone(), Entry::Dir);
            p = parent(&p).to_string();
        }
    }

    fn drop_file(&mut self, f: &FileMeta, freed: &mut Vec<u64>) {
        self.by_id.remove(&f.id);
        for b in &f.blocks {
            for c in &b.chunks {
                self.chunk_owner.remove(c);
                freed.push(*c);
            }
        }
    }

    fn open_file_mut(&mut self, op: &'static str, file_id: u64) -> FsResult<&mut FileMeta> {
        let Some(path) = self.by_id.get(&file_id).cloned() else {
            return Err(FsError::NotFound {
                op,
                path: format!("<file {file_id}, removed or replaced>"),
            });
        };
        match self.entries.get_mut(&path) {
            Some(Entry::File(f)) if f.open => Ok(f),
            Some(Entry::File(_)) => Err(FsError::Closed { op, path }),
            _ => Err(FsError::NotFound { op, path }),
        }
    }

    /// Applies an op, or refuses it without changing anything.
    pub fn apply(&mut self, op: &Op) -> FsResult<Applied> {
        let mut applied = Applied::default();
        match op {
            Op::Mkdirs { path } => {
                check_path("mkdirs", path)?;
                self.check_ancestors("mkdirs", path)?;
                match self.get(path) {
                    Some(Entry::File(_)) => {
                        return Err(FsError::NotADirectory {
                            op: "mkdirs",
                            path: path.clone(),
                        });
                    }
                    Some(Entry::Dir) => {}
                    None => {
                        self.make_parents(path);
                        self.entries.insert(path.clone(), Entry::Dir);
                    }
                }
            }
            Op::Create {
                path,
                file_id,
                overwrite,
            } => {
                check_path("create", path)?;
                self.check_ancestors("create", path)?;
                match self.get(path) {
                    Some(Entry::Dir) => {
                        return Err(FsError::IsADirectory {
                            op: "create",
                            path: path.clone(),
                        });
                    }
                    Some(Entry::File(_)) if !overwrite => {
                        return Err(FsError::AlreadyExists {
                            op: "create",
                            path: path.clone(),
                        });
                    }
                    Some(Entry::File(old)) => {
                        let old = old.clone();
                        self.drop_file(&old, &mut applied.freed_chunks);
                    }
                    None => {}
                }
                self.make_parents(path);
                self.entries.insert(
                    path.clone(),
                    Entry::File(FileMeta {
                        id: *file_id,
                        blocks: Vec::new(),
                        open: true,
                    }),
                );
                self.by_id.insert(*file_id, path.clone());
                self.next_id = self.next_id.max(file_id + 1);
            }
            Op::AddBlock { file_id, block } => {
                let f = self.open_file_mut("append", *file_id)?;
                if let Some(last) = f.blocks.last_mut() {
                    last.complete = true;
                }
                f.blocks.push(block.clone());
                for c in &block.chunks {
                    self.chunk_owner.insert(*c, (*file_id, block.id));
                }
                let max = block
                    .chunks
                    .iter()
                    .copied()
                    .max()
                    .unwrap_or(0)
                    .max(block.id);
                self.next_id = self.next_id.max(max + 1);
            }
            Op::SetLength {
                file_id,
                block_id,
                len,
                complete,
            } => {
                let f = self.open_file_mut("append", *file_id)?;
                let Some(b) = f.blocks.iter_mut().find(|b| b.id == *block_id) else {
                    return Err(FsError::Backend {
                        op: "append",
                        path: format!("<file {file_id}>"),
                        msg: format!("no block {block_id}"),
                    });
                };
                b.len = *len;
                b.complete |= *complete;
            }
            Op::Close { file_id } => {
                let f = self.open_file_mut("close", *file_id)?;
                f.open = false;
                if let Some(last) = f.blocks.last_mut() {
                    last.complete = true;
                }
            }
            Op::Remove { path } => {
                check_path("remove", path)?;
                match self.get(path) {
                    None => return Err(not_found("remove", path)),
                    Some(Entry::Dir) => {
                        return Err(FsError::IsADirectory {
                            op: "remove",
                            path: path.clone(),
                        });
                    }
                    Some(Entry::File(f)) => {
                        let f = f.clone();
                        self.drop_file(&f, &mut applied.freed_chunks);
                        self.entries.remove(path);
                    }
                }
            }
            Op::Rmdir { path, recursive } => {
                check_path("rmdir", path)?;
                match self.get(path) {
                    None => return Err(not_found("rmdir", path)),
                    Some(Entry::File(_)) => {
                        return Err(FsError::NotADirectory {
                            op: "rmdir",
                            path: path.clone(),
                        });
                    }
                    Some(Entry::Dir) => {}
                }
                let prefix = child_prefix(path);
                let below: Vec<String> = self
                    .entries
                    .range(prefix.clone()..)
                    .take_while(|(p, _)| p.starts_with(&prefix))
                    .map(|(p, _)| p.clone())
                    .collect();
                if !below.is_empty() && !recursive {
                    return Err(FsError::DirectoryNotEmpty {
                        op: "rmdir",
                        path: path.clone(),
                    });
                }
                for p in below {
                    if let Some(Entry::File(f)) = self.entries.remove(&p) {
                        self.drop_file(&f, &mut applied.freed_chunks);
                    }
                }
                if path != "/" {
                    self.entries.remove(path);
                }
            }
            Op::Rename { from, to } => {
                check_path("rename", from)?;
                check_path("rename", to)?;
                let Some(entry) = self.get(from).cloned() else {
                    return Err(not_found("rename", from));
                };
                if self.get(to).is_some() {
                    return Err(FsError::AlreadyExists {
                        op: "rename",
                        path: to.clone(),
                    });
                }
                let from_prefix = child_prefix(from);
                if from == "/" || to.starts_with(&from_prefix) {
                    return Err(FsError::InvalidPath {
                        op: "rename",
                        path: to.clone(),
                        why: "target inside the source",
                    });
                }
                self.check_ancestors("rename", to)?;
                self.make_parents(to);
                let mut moves = vec![(from.clone(), to.clone())];
                if matches!(entry, Entry::Dir) {
                    let to_prefix = child_prefix(to);
                    for (p, _) in self
                        .entries
                        .range(from_prefix.clone()..)
                        .take_while(|(p, _)| p.starts_with(&from_prefix))
                    {
                        moves.push((p.clone(), format!("{to_prefix}{}", &p[from_prefix.len()..])));
                    }
                }
                for (a, b) in moves {
                    if let Some(e) = self.entries.remove(&a) {
                        if let Entry::File(f) = &e {
                            self.by_id.insert(f.id, b.clone());
                        }
                        self.entries.insert(b, e);
                    }
                }
            }
        }
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(id: u64) -> BlockMeta {
        BlockMeta {
            id,
            len: 0,
            layout: Layout::Replicated { replicas: 3 },
            chunks: vec![id + 1],
            complete: false,
        }
    }

    #[test]
    fn ops_change_the_tree_and_refusals_change_nothing() {
        let mut ns = Namespace::new();
        ns.apply(&Op::Mkdirs {
            path: "/a/b".into(),
        })
        .unwrap();
        let id = ns.alloc_ids(1);
        ns.apply(&Op::Create {
            path: "/a/b/f".into(),
            file_id: id,
            overwrite: false,
        })
        .unwrap();
        let b = ns.alloc_ids(2);
        ns.apply(&Op::AddBlock {
            file_id: id,
            block: block(b),
        })
        .unwrap();
        ns.apply(&Op::SetLength {
            file_id: id,
            block_id: b,
            len: 42,
            complete: false,
        })
        .unwrap();
        assert_eq!(ns.chunk_owner(b + 1), Some((id, b)));
        let before = serde_json::to_string(&ns).unwrap();
        assert!(matches!(
            ns.apply(&Op::Create {
                path: "/a/b/f".into(),
                file_id: 99,
                overwrite: false
            }),
            Err(FsError::AlreadyExists { .. })
        ));
        assert!(matches!(
            ns.apply(&Op::Rmdir {
                path: "/a".into(),
                recursive: false
            }),
            Err(FsError::DirectoryNotEmpty { .. })
        ));
        assert!(matches!(
            ns.apply(&Op::Mkdirs {
                path: "/a/b/f/g".into()
            }),
            Err(FsError::NotADirectory { .. })
        ));
        assert_eq!(serde_json::to_string(&ns).unwrap(), before);
        ns.apply(&Op::Rename {
            from: "/a".into(),
            to: "/z".into(),
        })
        .unwrap();
        assert_eq!(ns.file_by_id(id).unwrap().0, "/z/b/f");
        assert_eq!(ns.readdir("/z/b").unwrap()[0].length, 42);
        ns.apply(&Op::Close { file_id: id }).unwrap();
        assert!(matches!(
            ns.apply(&Op::SetLength {
                file_id: id,
                block_id: b,
                len: 1,
                complete: false
            }),
            Err(FsError::Closed { .. })
        ));
        let freed = ns
            .apply(&Op::Rmdir {
                path: "/".into(),
                recursive: true,
            })
            .unwrap();
        assert_eq!(freed.freed_chunks, vec![b + 1]);
        assert_eq!(ns.readdir("/").unwrap(), vec![]);
        assert_eq!(ns.chunk_owner(b + 1), None);
    }
}
