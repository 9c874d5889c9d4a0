//! Corruption tests of what the dfs-broker crate persists (issue 12): the object-store
//! backend's manifest objects (docs/formats/objstore.md) on `file://`, every byte flipped, every
//! truncation, deleted; and its segment objects truncated and deleted (segments carry no
//! checksum of their own by design: flips in them are the store's to catch). Reading the file
//! must give exactly its bytes or an error naming it. The broker service itself persists
//! nothing (it serves another `Fs`).

#[path = "../../testsupport/corrupt.rs"]
mod corrupt;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corrupt::Plan;
use dfs_broker::objstore::{ObjectStoreFs, ObjectStoreOptions};
use dfs_broker::{AppendFlag, Fs};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

fn fs_at(dir: &Path) -> Arc<dyn Fs> {
    let url = format!("file://{}", dir.display());
    Arc::new(ObjectStoreFs::from_url(&url, ObjectStoreOptions::default()).expect("from_url"))
}

/// Reads `/a/b` whole through a fresh file system on `dir`.
fn read_file(rt: &tokio::runtime::Runtime, dir: &Path) -> Result<Vec<u8>, String> {
    rt.block_on(async {
        let fs = fs_at(dir);
        let r = fs.open("/a/b").await.map_err(|e| e.to_string())?;
        let len = r.length().await.map_err(|e| e.to_string())?;
        let listed = fs.length("/a/b").await.map_err(|e| e.to_string())?;
        if listed != len {
            return Err(format!("/a/b: length {listed} vs reader length {len}"));
        }
        r.pread(0, len as usize).await.map_err(|e| e.to_string())
    })
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("list") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).expect("under").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_damage_of_an_object_store_manifest_or_segment_is_the_file_or_an_error_naming_it() {
    let rt = runtime();
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = tmp.path().join("pristine");
    std::fs::create_dir_all(&pristine).expect("mkdir");
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 31 % 253) as u8).collect();
    rt.block_on(async {
        let fs = fs_at(&pristine);
        let mut w = fs.create("/a/b", false).await.expect("create");
        for part in data.chunks(1000) {
            w.append(part, AppendFlag::Flush).await.expect("append");
        }
        w.close().await.expect("close");
    });
    assert_eq!(read_file(&rt, &pristine).as_deref(), Ok(&data[..]));
    let files = files_under(&pristine);
    let manifest = PathBuf::from("files/a/b");
    assert!(files.contains(&manifest), "{files:?}");
    let segments: Vec<PathBuf> = files
        .iter()
        .filter(|p| p.starts_with("segments"))
        .cloned()
        .collect();
    assert_eq!(segments.len(), 3, "{files:?}");
    let judge = |_, msg: &str| {
        if msg.contains("/a/b") {
            Ok(())
        } else {
            Err("the error does not name /a/b".to_string())
        }
    };
    let len = std::fs::metadata(pristine.join(&manifest))
        .expect("stat")
        .len();
    assert_eq!(len, 40 + 8 * 3);
    let plan = Plan::new()
        .flip_every_byte(len)
        .truncate_at(len, &[36, 44, 52], len as usize)
        .delete();
    let r = corrupt::run_with(
        "object-store manifest",
        &pristine,
        &manifest,
        &data,
        &plan,
        |dir| read_file(&rt, dir),
        judge,
    );
    assert_eq!(r.identical, 0, "every manifest byte is checked: {r:?}");
    for seg in &segments {
        let len = std::fs::metadata(pristine.join(seg)).expect("stat").len();
        let plan = Plan::new().truncate_at(len, &[], 4).delete();
        let r = corrupt::run_with(
            &format!("object-store segment {}", seg.display()),
            &pristine,
            seg,
            &data,
            &plan,
            |dir| read_file(&rt, dir),
            judge,
        );
        assert_eq!(r.identical, 0, "{r:?}");
    }
}
