//! Unit tests of the object-store backend: path escaping, segment spanning reads, corrupt
//! manifests in the store, readers of overwritten files, names like the layout's own.

use super::*;

#[test]
fn path_helpers() {
    assert_eq!(parent("/a"), "/");
    assert_eq!(parent("/a/b/c"), "/a/b");
    assert_eq!(ancestors("/a/b/c"), vec!["/a", "/a/b"]);
    assert!(ancestors("/a").is_empty());
    assert_eq!(escape(".x"), "..x");
    assert_eq!(escape("x."), "x.");
    assert_eq!(unescape("..x").as_deref(), Some(".x"));
    assert_eq!(unescape("a%25b").as_deref(), Some("a%b"));
    assert_eq!(unescape(DIR_MARKER), None);
    assert_eq!(unescape(".y"), None);
}

/// Names that look like the layout's own (`.dir`, `files`, `segments`) are plain files.
#[tokio::test]
async fn reserved_looking_names() {
    let fs = ObjectStoreFs::from_url("memory://", ObjectStoreOptions::default()).expect("from_url");
    for p in ["/.dir", "/d/.dir", "/segments", "/files", "/d/%41#1"] {
        let mut w = fs.create(p, false).await.expect("create");
        w.append(p.as_bytes(), crate::AppendFlag::Flush)
            .await
            .expect("append");
        w.close().await.expect("close");
    }
    let names: Vec<String> = fs
        .readdir("/")
        .await
        .expect("readdir")
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, [".dir", "d", "files", "segments"]);
    let names: Vec<String> = fs
        .readdir("/d")
        .await
        .expect("readdir")
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["%41#1", ".dir"]);
    fs.remove("/d/.dir").await.expect("remove");
    fs.remove("/d/%41#1").await.expect("remove");
    assert!(
        fs.exists("/d").await.expect("exists"),
        "the directory stays"
    );
    assert_eq!(fs.readdir("/d").await.expect("readdir"), vec![]);
}

fn small(segment_bytes: usize) -> ObjectStoreFs {
    let opts = ObjectStoreOptions {
        segment_bytes,
        ..Default::default()
    };
    ObjectStoreFs::from_url("memory://", opts).expect("from_url")
}

/// Reads spanning several segments, of sizes set by flushes and by the buffer bound.
#[tokio::test]
async fn pread_spans_segments() {
    let fs = small(100);
    let data: Vec<u8> = (0..1000u32).map(|i| (i % 253) as u8).collect();
    let mut w = fs.create("/f", false).await.expect("create");
    // Segments: 7 (flush), 3 (flush), 130 (buffer bound crossed), 1 (flush), then the rest
    // in appends of 50 (a segment every 100 bytes).
    w.append(&data[0..7], crate::AppendFlag::Flush)
        .await
        .expect("append");
    w.append(&data[7..10], crate::AppendFlag::Sync)
        .await
        .expect("append");
    w.append(&data[10..140], crate::AppendFlag::None)
        .await
        .expect("append");
    w.append(&data[140..141], crate::AppendFlag::Flush)
        .await
        .expect("append");
    for c in data[141..].chunks(50) {
        w.append(c, crate::AppendFlag::None).await.expect("append");
    }
    w.close().await.expect("close");
    let segs = fs
        .store()
        .list(Some(&Path::from("segments")))
        .try_collect::<Vec<_>>()
        .await
        .expect("list segments");
    assert!(segs.len() > 10, "only {} segments", segs.len());
    let r = fs.open("/f").await.expect("open");
    assert_eq!(r.length().await.expect("length"), 1000);
    for (off, len) in [
        (0, 1000),
        (5, 3),
        (6, 5),
        (9, 133),
        (139, 3),
        (0, 141),
        (500, 500),
        (999, 1),
    ] {
        let got = r.pread(off as u64, len).await.expect("pread");
        assert_eq!(got, &data[off..off + len], "pread({off}, {len})");
    }
}

/// A manifest object that does not decode is an error naming it, never a panic.
#[tokio::test]
async fn corrupt_manifest_in_the_store() {
    let fs = small(1 << 20);
    let mut w = fs.create("/d/f", false).await.expect("create");
    w.append(b"hello", crate::AppendFlag::Flush)
        .await
        .expect("append");
    w.close().await.expect("close");
    let key = Path::from("files/d/f");
    let good = fs
        .store()
        .get(&key)
        .await
        .expect("get")
        .bytes()
        .await
        .expect("bytes");
    let mut flipped = good.to_vec();
    flipped[30] ^= 1;
    for bad in [flipped, good[..good.len() - 3].to_vec(), Vec::new()] {
        fs.store()
            .put(&key, bad.into())
            .await
            .expect("put corrupt manifest");
        for res in [
            fs.open("/d/f").await.map(|_| ()),
            fs.length("/d/f").await.map(|_| ()),
            fs.readdir("/d").await.map(|_| ()),
            fs.rename("/d/f", "/d/g").await,
        ] {
            match res {
                Err(FsError::Backend { msg, .. }) => {
                    assert!(msg.contains("files/d/f"), "{msg}")
                }
                other => panic!("expected a corrupt-manifest error, got {other:?}"),
            }
        }
    }
    // A corrupt file can still be removed or overwritten.
    let mut w = fs.create("/d/f", true).await.expect("overwrite");
    w.close().await.expect("close");
    fs.remove("/d/f").await.expect("remove");
    assert!(!fs.exists("/d/f").await.expect("exists"));
}

/// A reader of a file that is overwritten reads the new file, or past its end.
#[tokio::test]
async fn reader_of_an_overwritten_file() {
    let fs = small(1 << 20);
    let mut w = fs.create("/f", false).await.expect("create");
    w.append(b"0123456789", crate::AppendFlag::Flush)
        .await
        .expect("append");
    w.close().await.expect("close");
    let r = fs.open("/f").await.expect("open");
    assert_eq!(r.pread(0, 4).await.expect("pread"), b"0123");
    let mut w = fs.create("/f", true).await.expect("overwrite");
    w.append(b"abcdef", crate::AppendFlag::Flush)
        .await
        .expect("append");
    assert_eq!(r.pread(0, 4).await.expect("pread"), b"abcd");
    assert!(matches!(
        r.pread(4, 4).await,
        Err(FsError::ReadPastEnd { file_len: 6, .. })
    ));
    w.close().await.expect("close");
}

#[test]
fn bad_urls_are_errors() {
    let o = ObjectStoreOptions::default;
    assert!(ObjectStoreFs::from_url("not a url", o()).is_err());
    assert!(ObjectStoreFs::from_url("nosuchscheme://x/y", o()).is_err());
    assert!(ObjectStoreFs::from_url("file://host/relative", o()).is_err());
}
