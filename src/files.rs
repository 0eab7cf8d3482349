//! The files wgflow reads and writes: bounded reads of regular files, and atomic replacement.
//!
//! Every file wgflow writes (checkpoints, graph files, `.npy` outputs, the pipeline cache)
//! goes through [`write_atomic`]: the bytes go to a fresh temporary file in the target's
//! directory, are flushed to disk, and the temporary is renamed over the target, so a reader
//! (or a crash, or a concurrent writer) sees the old file or the new one, never a mix. Links
//! and special files are refused at the target, so a save never writes through a symlink a
//! third party planted, nor replaces a device node.
//!
//! Every file wgflow reads goes through [`read_regular`]: FIFOs, directories and devices are
//! refused (a FIFO would block, `/dev/zero` would never end), the size is checked against
//! what the format allows before anything is allocated, and the allocation itself is
//! fallible.

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a temporary file's name carries after the target's name: `.NAME.wgflow-tmp.PID.N`.
const TMP_TAG: &str = ".wgflow-tmp.";
/// The longest target name kept whole in a temporary's name: with the dot, the tag, a pid and
/// a counter, the name stays under the common 255-byte `NAME_MAX`.
const TMP_STEM_MAX: usize = 200;

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// What kind of file `meta` describes, for messages.
fn kind(meta: &std::fs::Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    if t.is_symlink() {
        return "a symbolic link";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "a special file"
}

/// Open `path` for reading if it is a regular file (links to one are followed), returning it
/// with its length. A FIFO is opened without blocking so that it can be refused.
pub fn open_regular(path: &Path) -> io::Result<(File, u64)> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO opened for reading blocks until a writer comes; non-blocking, it opens at
        // once and is refused below. Regular files ignore the flag.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(invalid(format!("is {}, not a regular file", kind(&meta))));
    }
    Ok((file, meta.len()))
}

/// The whole of regular file `path`, refusing it when it is longer than `max_len` bytes
/// (`what` names the format in that message), and failing cleanly when memory for it cannot
/// be had.
pub fn read_regular(path: &Path, max_len: u64, what: &str) -> io::Result<Vec<u8>> {
    let (file, len) = open_regular(path)?;
    if len > max_len {
        return Err(invalid(format!(
            "is {len} bytes, more than the {max_len} a {what} may have"
        )));
    }
    // `take`: a file that grows while it is read still stops at the bound.
    let bytes = read_bounded(file, len, max_len.saturating_add(1))?;
    if bytes.len() as u64 > max_len {
        return Err(invalid(format!(
            "grew past the {max_len} bytes a {what} may have while it was read"
        )));
    }
    Ok(bytes)
}

/// At most `limit` bytes from `file`'s position, with room for `expect` reserved up front
/// (failing cleanly, not aborting, when memory for them cannot be had).
fn read_bounded(file: File, expect: u64, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(expect as usize).map_err(|_| {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("cannot allocate {expect} bytes to read it"),
        )
    })?;
    file.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Bytes `offset..offset + len` of the file at `rel` under `dir` (to its end when `len` is
/// `None`), for data a model points at. The file must resolve, links followed, to a regular
/// file inside `dir`'s canonical path (a link to `../secret` or to `/proc/self/environ` is
/// refused), on a file system that reports its size (procfs and sysfs report 0 for files
/// that hold bytes, so they are refused). Only the range is read: a seek and a bounded
/// read, with `max_len` applying to the range, not to the file.
pub fn read_range_inside(
    dir: &Path,
    rel: &Path,
    offset: u64,
    len: Option<u64>,
    max_len: u64,
) -> io::Result<Vec<u8>> {
    use std::io::{Seek, SeekFrom};
    // `model.onnx` given bare has the parent "", which is the working directory.
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let root = dir.canonicalize()?;
    let real = root.join(rel).canonicalize()?;
    let outside = || {
        invalid(format!(
            "resolves to {}, outside {}",
            real.display(),
            root.display()
        ))
    };
    if !real.starts_with(&root) {
        return Err(outside());
    }
    let (mut file, size) = open_regular(&real)?;
    // A link swapped in between the check and the open: ask the kernel what was opened.
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        if let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
            if !opened.starts_with(&root) {
                return Err(outside());
            }
        }
        if size_unknown(&file) {
            return Err(invalid(
                "is on a file system that does not report file sizes (procfs, sysfs)".into(),
            ));
        }
    }
    let len = len.unwrap_or(size.saturating_sub(offset));
    let end = offset.checked_add(len).filter(|&e| e <= size);
    if end.is_none() {
        return Err(invalid(format!(
            "offset {offset} + length {len} is past its end ({size} bytes)"
        )));
    }
    if len > max_len {
        return Err(invalid(format!(
            "a range of {len} bytes is more than the {max_len} that may be read"
        )));
    }
    file.seek(SeekFrom::Start(offset))?;
    let bytes = read_bounded(file, len, len)?;
    if bytes.len() as u64 != len {
        return Err(invalid(format!(
            "shrank while it was read ({} of {len} bytes)",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// Whether `file` is on procfs or sysfs, whose files report size 0 whatever they hold.
#[cfg(target_os = "linux")]
fn size_unknown(file: &File) -> bool {
    use std::os::unix::io::AsRawFd;
    const PROC_SUPER_MAGIC: i64 = 0x9fa0;
    const SYSFS_MAGIC: i64 = 0x6265_6572;
    // SAFETY: fstatfs writes one `statfs` into the zeroed buffer we own; the descriptor is
    // open for the call's duration.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    matches!(st.f_type as i64, PROC_SUPER_MAGIC | SYSFS_MAGIC)
}

/// Replace `path` with `bytes` atomically; see [`write_atomic_with`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Replace `path` atomically with what `write` writes: into a new temporary file in the same
/// directory (created exclusively, so never through a link), flushed to disk, renamed over
/// `path`, and the directory flushed so that the rename itself survives a power cut. When
/// this returns `Ok`, the new file is durable; on any error `path` is untouched and the
/// temporary is removed.
///
/// Refused: a `path` that is a symbolic link (even one to a regular file), a directory, a
/// FIFO, a device or a socket. Temporaries that a killed writer left beside `path` are
/// removed first (those whose process is gone).
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut File) -> io::Result<()>,
) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| invalid("names no file (it ends in '..' or '/')".into()))?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_file() => {
            return Err(invalid(format!(
                "is {}; only a regular file is replaced",
                kind(&meta)
            )));
        }
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    publish(&dir, name, write, |tmp| std::fs::rename(tmp, path))
}

/// Create `path` with `bytes`, atomically and only if nothing is there yet: the bytes go to
/// a temporary beside it as in [`write_atomic`], which is then hard-linked to `path` (a link
/// fails on an existing name, file or link, and never follows one) and removed. A reader or a
/// crash sees no file or the whole one. An existing `path` is an
/// [`io::ErrorKind::AlreadyExists`] error.
pub fn create_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| invalid("names no file (it ends in '..' or '/')".into()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    publish(
        &dir,
        name,
        |f| f.write_all(bytes),
        |tmp| {
            std::fs::hard_link(tmp, path)?;
            std::fs::remove_file(tmp)
        },
    )
}

/// Write a temporary beside `path` with `write`, flush it, make it `path` with `commit`, and
/// flush the directory; on any error the temporary is removed and `path` is untouched.
// wasm32's `File` (which cannot be opened) has no destructor to run.
#[cfg_attr(target_arch = "wasm32", allow(clippy::drop_non_drop))]
fn publish(
    dir: &Path,
    name: &OsStr,
    write: impl FnOnce(&mut File) -> io::Result<()>,
    commit: impl FnOnce(&Path) -> io::Result<()>,
) -> io::Result<()> {
    remove_stale_temporaries(dir, name);
    let (tmp, mut file) = create_temporary(dir, name)?;
    let written = write(&mut file)
        .and_then(|()| file.sync_all())
        .and_then(|()| {
            drop(file);
            commit(&tmp)
        });
    if let Err(e) = written {
        std::fs::remove_file(&tmp).ok();
        return Err(e);
    }
    sync_dir(dir)
}

/// The prefix of every temporary file of target `name`: `.NAME.wgflow-tmp.` (long names cut
/// on a character boundary).
fn temporary_prefix(name: &OsStr) -> OsString {
    let lossy = name.to_string_lossy();
    let mut end = lossy.len().min(TMP_STEM_MAX);
    while !lossy.is_char_boundary(end) {
        end -= 1;
    }
    let mut prefix = OsString::from(".");
    prefix.push(&lossy[..end]);
    prefix.push(TMP_TAG);
    prefix
}

/// A new temporary file in `dir` for target `name`, created exclusively (`O_EXCL`: an
/// existing file or link at that name makes it pick another name, never open it).
fn create_temporary(dir: &Path, name: &OsStr) -> io::Result<(PathBuf, File)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = temporary_prefix(name);
    let pid = std::process::id();
    for _ in 0..64 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let mut file_name = prefix.clone();
        file_name.push(format!("{pid}.{n}"));
        let tmp = dir.join(file_name);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o644);
        }
        match options.open(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "could not create a temporary file beside it (64 names taken)",
    ))
}

/// Remove the temporaries of target `name` in `dir` whose writing process is gone (killed
/// during a save). Best effort: a failure leaves them for next time.
fn remove_stale_temporaries(dir: &Path, name: &OsStr) {
    let prefix = temporary_prefix(name);
    let prefix = prefix.to_string_lossy();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        let Some(rest) = file_name.strip_prefix(prefix.as_ref()) else {
            continue;
        };
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let regular = entry
            .file_type()
            .map(|t| t.is_file() || t.is_symlink())
            .unwrap_or(false);
        if regular && !process_alive(pid) {
            std::fs::remove_file(entry.path()).ok();
        }
    }
}

/// Whether process `pid` may still be running (on platforms where this cannot be told, yes).
fn process_alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    #[cfg(target_os = "linux")]
    {
        Path::new("/proc").join(pid.to_string()).exists() || !Path::new("/proc/self").exists()
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

/// Flush a directory's entries (the rename) to disk. Platforms that cannot open a directory
/// (Windows) make renames durable themselves.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wgflow-files-{tag}-{}", std::process::id()));
        std::fs::remove_dir_all(&d).ok();
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn replaces_atomically_and_leaves_no_temporary() {
        let d = scratch("replace");
        let p = d.join("a.bin");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two!").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two!");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn create_atomic_never_replaces_anything() {
        let d = scratch("create");
        let p = d.join("out.npy");
        create_atomic(&p, b"first").unwrap();
        let e = create_atomic(&p, b"second").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&p).unwrap(), b"first");
        #[cfg(unix)]
        {
            let victim = d.join("victim");
            std::fs::write(&victim, b"precious").unwrap();
            let dangling = d.join("dangling");
            std::os::unix::fs::symlink(d.join("nowhere"), &dangling).unwrap();
            let link = d.join("link");
            std::os::unix::fs::symlink(&victim, &link).unwrap();
            for l in [&dangling, &link] {
                let e = create_atomic(l, b"x").unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
            }
            assert!(!d.join("nowhere").exists());
            assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        }
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            if cfg!(unix) { 4 } else { 1 }
        );
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn a_long_name_gets_a_temporary_within_name_max() {
        let d = scratch("long");
        let p = d.join("x".repeat(253));
        write_atomic(&p, b"ok").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"ok");
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn a_failed_write_keeps_the_old_file() {
        let d = scratch("fail");
        let p = d.join("a.bin");
        write_atomic(&p, b"good").unwrap();
        let e = write_atomic_with(&p, |f| {
            f.write_all(b"half")?;
            Err(io::Error::other("disk on fire"))
        })
        .unwrap_err();
        assert!(e.to_string().contains("disk on fire"));
        assert_eq!(std::fs::read(&p).unwrap(), b"good");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        std::fs::remove_dir_all(&d).ok();
    }

    #[cfg(unix)]
    #[test]
    fn links_and_special_files_are_refused() {
        let d = scratch("links");
        let victim = d.join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let link = d.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = write_atomic(&link, b"x").unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        let e = write_atomic(&d, b"x").unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        let e = write_atomic(Path::new("/dev/null"), b"x").unwrap_err();
        assert!(e.to_string().contains("device"), "{e}");
        // A link planted where a temporary would go is skipped, never written through.
        let target = d.join("t.bin");
        let prefix = temporary_prefix(OsStr::new("t.bin"));
        for n in 0..4u64 {
            let mut planted = prefix.clone();
            planted.push(format!("{}.{n}", std::process::id()));
            std::os::unix::fs::symlink(&victim, d.join(planted)).ok();
        }
        write_atomic(&target, b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert!(!std::fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_symlink());
        std::fs::remove_dir_all(&d).ok();
    }

    #[cfg(unix)]
    #[test]
    fn reads_refuse_fifos_directories_devices_and_oversized_files() {
        let d = scratch("reads");
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        for (p, word) in [
            (fifo.as_path(), "FIFO"),
            (d.as_path(), "directory"),
            (Path::new("/dev/zero"), "device"),
        ] {
            let e = read_regular(p, 1 << 20, "test file").unwrap_err();
            assert!(e.to_string().contains(word), "{}: {e}", p.display());
        }
        let f = d.join("big");
        std::fs::write(&f, [0u8; 100]).unwrap();
        let e = read_regular(&f, 99, "test file").unwrap_err();
        assert!(e.to_string().contains("more than the 99"), "{e}");
        assert_eq!(read_regular(&f, 100, "test file").unwrap().len(), 100);
        std::fs::remove_dir_all(&d).ok();
    }

    #[test]
    fn stale_temporaries_of_dead_processes_are_removed() {
        let d = scratch("stale");
        let name = OsStr::new("c.safetensors");
        let mut dead = temporary_prefix(name);
        // Linux pids stay below 2^22.
        dead.push("4294967.0");
        let mut live = temporary_prefix(name);
        live.push(format!("{}.999999", std::process::id()));
        std::fs::write(d.join(&dead), b"stale").unwrap();
        std::fs::write(d.join(&live), b"in flight").unwrap();
        write_atomic(&d.join(name), b"new").unwrap();
        #[cfg(target_os = "linux")]
        assert!(!d.join(&dead).exists());
        assert!(d.join(&live).exists());
        std::fs::remove_dir_all(&d).ok();
    }
}
