//! A minimal writer of the `newc` cpio format the kernel unpacks as initramfs
//! (Documentation/driver-api/early-userspace/buffer-format.rst), uncompressed: under TCG the
//! guest would spend longer decompressing than reading.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// One entry of the archive.
#[derive(Debug, Clone)]
pub enum Entry {
    Dir,
    /// Contents from a host file, or given bytes.
    File {
        src: Source,
        mode: u32,
    },
    Symlink(String),
    /// Character device (major, minor).
    CharDev(u32, u32),
}

#[derive(Debug, Clone)]
pub enum Source {
    Path(PathBuf),
    Bytes(Vec<u8>),
}

/// The archive being assembled: path (without leading '/') -> entry. Parent directories are
/// added as needed.
#[derive(Debug, Default)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

impl Archive {
    pub fn new() -> Self {
        Archive::default()
    }

    fn norm(path: &str) -> String {
        path.trim_start_matches('/')
            .trim_end_matches('/')
            .to_string()
    }

    fn add_parents(&mut self, path: &str) {
        let mut cur = String::new();
        let parts: Vec<&str> = path.split('/').collect();
        for p in &parts[..parts.len().saturating_sub(1)] {
            if !cur.is_empty() {
                cur.push('/');
            }
            cur.push_str(p);
            self.entries.entry(cur.clone()).or_insert(Entry::Dir);
        }
    }

    pub fn dir(&mut self, path: &str) {
        let p = Self::norm(path);
        self.add_parents(&p);
        self.entries.insert(p, Entry::Dir);
    }

    pub fn file_from(&mut self, path: &str, src: &Path, mode: u32) {
        let p = Self::norm(path);
        self.add_parents(&p);
        self.entries.insert(
            p,
            Entry::File {
                src: Source::Path(src.to_path_buf()),
                mode,
            },
        );
    }

    pub fn file_bytes(&mut self, path: &str, data: impl Into<Vec<u8>>, mode: u32) {
        let p = Self::norm(path);
        self.add_parents(&p);
        self.entries.insert(
            p,
            Entry::File {
                src: Source::Bytes(data.into()),
                mode,
            },
        );
    }

    pub fn symlink(&mut self, path: &str, target: &str) {
        let p = Self::norm(path);
        self.add_parents(&p);
        self.entries.insert(p, Entry::Symlink(target.to_string()));
    }

    pub fn char_dev(&mut self, path: &str, major: u32, minor: u32) {
        let p = Self::norm(path);
        self.add_parents(&p);
        self.entries.insert(p, Entry::CharDev(major, minor));
    }

    pub fn contains(&self, path: &str) -> bool {
        self.entries.contains_key(&Self::norm(path))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes the archive (parents before children: BTreeMap order puts "a" before "a/b").
    pub fn write_to(&self, w: &mut impl Write) -> io::Result<u64> {
        let mut n = 0u64;
        for (ino, (path, e)) in (1u32..).zip(self.entries.iter()) {
            let (mode, data, rdev): (u32, Vec<u8>, (u32, u32)) = match e {
                Entry::Dir => (0o040755, Vec::new(), (0, 0)),
                Entry::File { src, mode } => {
                    let data = match src {
                        Source::Bytes(b) => b.clone(),
                        Source::Path(p) => std::fs::read(p).map_err(|e| {
                            io::Error::new(e.kind(), format!("{}: {e}", p.display()))
                        })?,
                    };
                    (0o100000 | (mode & 0o7777), data, (0, 0))
                }
                Entry::Symlink(t) => (0o120777, t.as_bytes().to_vec(), (0, 0)),
                Entry::CharDev(ma, mi) => (0o020600, Vec::new(), (*ma, *mi)),
            };
            let nlink = if matches!(e, Entry::Dir) { 2 } else { 1 };
            n += write_entry(w, path, ino, mode, nlink, &data, rdev)?;
        }
        n += write_entry(w, "TRAILER!!!", 0, 0, 1, &[], (0, 0))?;
        Ok(n)
    }
}

fn pad4(w: &mut impl Write, len: u64) -> io::Result<u64> {
    let pad = (4 - (len % 4)) % 4;
    w.write_all(&[0u8; 3][..pad as usize])?;
    Ok(pad)
}

fn write_entry(
    w: &mut impl Write,
    name: &str,
    ino: u32,
    mode: u32,
    nlink: u32,
    data: &[u8],
    rdev: (u32, u32),
) -> io::Result<u64> {
    let namesize = name.len() + 1;
    let header = format!(
        "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
        ino,
        mode,
        0, // uid
        0, // gid
        nlink,
        0, // mtime: reproducible archives
        data.len(),
        0, // devmajor
        0, // devminor
        rdev.0,
        rdev.1,
        namesize,
        0, // check
    );
    w.write_all(header.as_bytes())?;
    w.write_all(name.as_bytes())?;
    w.write_all(&[0])?;
    let mut n = header.len() as u64 + namesize as u64;
    n += pad4(w, n)?;
    w.write_all(data)?;
    n += data.len() as u64;
    n += pad4(w, n)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_layout() {
        let mut a = Archive::new();
        a.file_bytes("/etc/x/y", b"hello".to_vec(), 0o644);
        a.symlink("bin/sh", "busybox");
        let mut out = Vec::new();
        let n = a.write_to(&mut out).unwrap();
        assert_eq!(n as usize, out.len());
        assert_eq!(out.len() % 4, 0);
        let s = String::from_utf8_lossy(&out);
        // Parents first, then the file, the trailer last.
        let pos = |needle: &str| s.find(needle).unwrap();
        assert!(pos("etc\0") < pos("etc/x\0"));
        assert!(pos("etc/x\0") < pos("etc/x/y\0"));
        assert!(s.contains("hello"));
        assert!(s.ends_with("TRAILER!!!\0\0\0\0") || s.contains("TRAILER!!!"));
        assert!(s.starts_with("070701"));
        assert_eq!(a.len(), 5); // bin, bin/sh, etc, etc/x, etc/x/y
    }

    #[test]
    fn cpio_tool_reads_it() {
        // Cross-check with GNU cpio when it is installed.
        let Some(cpio) = crate::util::which("cpio") else {
            return;
        };
        let mut a = Archive::new();
        a.file_bytes("a/b.txt", b"abc".to_vec(), 0o600);
        a.symlink("a/l", "b.txt");
        let mut out = Vec::new();
        a.write_to(&mut out).unwrap();
        let mut child = std::process::Command::new(cpio)
            .args(["-t", "--quiet"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&out).unwrap();
        let o = child.wait_with_output().unwrap();
        let list = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success());
        assert_eq!(list.lines().collect::<Vec<_>>(), ["a", "a/b.txt", "a/l"]);
    }
}
