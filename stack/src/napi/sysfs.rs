//! An interface's sysfs directory (`/sys/class/net/IF`, or under a test's root): numbers
//! read and written through a held directory fd.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::NapiError;

/// An interface's sysfs directory, held open: reads and writes go through it (openat), so a
/// guard restores the same device wherever it is dropped.
#[derive(Debug)]
pub(super) struct IfDir {
    dir: File,
    path: PathBuf,
}

impl IfDir {
    pub(super) fn open(root: &Path, iface: &str) -> Result<IfDir, NapiError> {
        let missing = || NapiError::NoSuchInterface { iface: iface.to_string(), root: root.to_path_buf() };
        if iface.is_empty() || iface.contains('/') || iface == "." || iface == ".." {
            return Err(missing());
        }
        let path = root.join("class/net").join(iface);
        let dir = File::options()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENOENT | libc::ENOTDIR) => missing(),
                _ => NapiError::Sysfs { path: path.clone(), source: e },
            })?;
        Ok(IfDir { dir, path })
    }

    fn open_file(&self, name: &str, flags: libc::c_int) -> io::Result<File> {
        let c = CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: `self.dir` is an open directory fd and `c` a NUL-terminated name, both live
        // for the call; the returned fd is checked and then owned by the File alone.
        let fd = unsafe { libc::openat(self.dir.as_raw_fd(), c.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just returned by openat and is owned by nobody else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// The number in `name`, or `None` if there is no such file.
    pub(super) fn read(&self, name: &str) -> Result<Option<u64>, NapiError> {
        let path = self.path.join(name);
        let mut text = String::new();
        match self.open_file(name, libc::O_RDONLY).and_then(|mut f| f.read_to_string(&mut text)) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(source) => return Err(NapiError::Sysfs { path, source }),
        }
        match text.trim().parse() {
            Ok(v) => Ok(Some(v)),
            Err(_) => Err(NapiError::Parse { path, content: text }),
        }
    }

    pub(super) fn write(&self, name: &str, value: u64) -> Result<(), NapiError> {
        let path = self.path.join(name);
        let r = self
            .open_file(name, libc::O_WRONLY | libc::O_TRUNC)
            .and_then(|mut f| f.write_all(format!("{value}\n").as_bytes()));
        r.map_err(|source| match source.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => NapiError::PermissionDenied { what: path.display().to_string() },
            Some(libc::EINVAL | libc::ERANGE) => {
                NapiError::InvalidValue { what: path.display().to_string(), value, source }
            }
            _ => NapiError::Sysfs { path, source },
        })
    }

    pub(super) fn ifindex(&self) -> Result<u32, NapiError> {
        let path = self.path.join("ifindex");
        match self.read("ifindex")? {
            Some(i) => u32::try_from(i).map_err(|_| NapiError::Parse { path, content: i.to_string() }),
            None => Err(NapiError::Sysfs { path, source: io::Error::from_raw_os_error(libc::ENOENT) }),
        }
    }
}
