//! What the CLI writes: standard output that tolerates a closed pipe, and output files that
//! are never written through a link or half-written.

use super::*;

/// Set once a write to stdout failed because its reader went away (`wgflow ... | head -1`).
pub(crate) static STDOUT_GONE: AtomicBool = AtomicBool::new(false);

/// Write to stdout; every line the CLI prints goes through here (never `print!`, which
/// panics on a closed pipe). A closed stdout is what `head` does on purpose, so it is not an
/// error: the rest of the output is dropped, the command still finishes its work (the
/// files of `run`, `--trace` and `--memory` are written) and exits with its own status,
/// 0 on success, without a message. Any other write error (`> /dev/full`) fails the command.
pub(crate) fn write_stdout(args: fmt::Arguments<'_>) -> CliResult {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut stdout = std::io::stdout().lock();
    match stdout.write_fmt(args).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_GONE.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(format!("cannot write to standard output: {e}").into()),
    }
}

/// Before any work: refuse an existing output file without `force`, anything at the path
/// that is not a regular file (see [`check_target`]), and a file whose directory does not
/// exist.
pub(crate) fn check_output(path: &Path, force: bool) -> CliResult {
    check_target(path, force)?;
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if parent.is_some_and(|p| !p.is_dir()) {
        return Err(format!("{}: cannot write: no such directory", path.display()).into());
    }
    Ok(())
}

/// What is at an output path, without following a link there: nothing, or (with `force`) a
/// regular file to replace. A symbolic link is refused, dangling or not, with or without
/// `force`: writing through it would create or change a file outside the place the user
/// named. A directory, FIFO, socket or device is refused too (a FIFO would block the
/// write until a reader came).
pub(crate) fn check_target(path: &Path, force: bool) -> CliResult {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: cannot write: {e}", path.display()).into()),
    };
    let refuse =
        |why: &str| -> CliResult { Err(format!("{}: cannot write: {why}", path.display()).into()) };
    let kind = meta.file_type();
    if kind.is_symlink() {
        refuse("is a symbolic link; wgflow does not write through links (remove it or choose another path)")
    } else if kind.is_dir() {
        refuse("is a directory")
    } else if !kind.is_file() {
        refuse("not a regular file (a FIFO, socket or device)")
    } else if !force {
        Err(format!(
            "{}: already exists; pass --force to overwrite",
            path.display()
        )
        .into())
    } else {
        Ok(())
    }
}

/// One file name per fetch, inside the output directory whatever the node name: characters
/// other than ASCII letters, digits, '-', '_' and '.' become '_' (so '/' and '\\' cannot
/// leave it), a leading '.' becomes '_' (no hidden files, no '..'), and a name already
/// taken (compared without case, for case-insensitive file systems) gets `_2`, `_3`, ...
pub(crate) fn file_names(names: &[&str]) -> Vec<String> {
    let mut taken = HashSet::new();
    names
        .iter()
        .map(|name| {
            let mut stem: String = name
                .chars()
                .map(|c| match c {
                    'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
                    _ => '_',
                })
                .collect();
            if stem.is_empty() || stem.starts_with('.') {
                stem.replace_range(..stem.len().min(1), "_");
            }
            let mut file = format!("{stem}.npy");
            let mut n = 2;
            while !taken.insert(file.to_lowercase()) {
                file = format!("{stem}_{n}.npy");
                n += 1;
            }
            file
        })
        .collect()
}

/// Write `v` to `path`; without `force`, refuse a file that appeared since the check.
pub(crate) fn write_npy(path: &Path, v: &HostTensor, force: bool) -> CliResult {
    write_output(path, &wgflow::npy::to_bytes(v), force)
}

/// Write `bytes` to `path`, never through a link at `path` and never into anything but a
/// regular file ([`check_target`]), atomically: a crash leaves the old file (or none) or the
/// whole new one. Without `force` the file must not exist
/// ([`wgflow::files::create_atomic`], which also refuses a link or file that appeared since
/// the check); with `force` the new contents replace it ([`wgflow::files::write_atomic`]).
pub(crate) fn write_output(path: &Path, bytes: &[u8], force: bool) -> CliResult {
    check_target(path, force)?;
    let written = if force {
        wgflow::files::write_atomic(path, bytes)
    } else {
        wgflow::files::create_atomic(path, bytes)
    };
    written.map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists if !force => format!(
            "{}: already exists; pass --force to overwrite",
            path.display()
        )
        .into(),
        _ => cannot_write(path, &e).into(),
    })
}

pub(crate) fn cannot_write(path: &Path, e: &std::io::Error) -> String {
    format!("{}: cannot write: {e}", path.display())
}
