//! Which files a configuration is read from, and which changes to them
//! matter.

use std::path::{Component, Path, PathBuf};

/// The files a load of `root` reads, in order: `root` itself if it is not
/// a directory; else every file below it whatever its name, in its
/// subdirectories too, as envoyproxy/ratelimit's runtime loader reads
/// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY`, but hidden ones (see
/// [`is_config_file`]). A link to a file is read through; a link to a
/// directory is not followed and a dangling link is passed over, as
/// upstream's loader does (so a Kubernetes ConfigMap volume, each file a
/// link through the hidden `..data`, reads each file once).
pub(crate) fn config_files(root: &Path) -> Result<Vec<PathBuf>, String> {
    if !root.is_dir() {
        return Ok(vec![root.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
            let path = entry.path();
            if !is_config_file(root, &path) {
                continue;
            }
            let kind = entry
                .file_type()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if kind.is_dir() {
                dirs.push(path);
            } else if !kind.is_symlink() {
                files.push(path);
            } else {
                match std::fs::metadata(&path) {
                    Ok(target) if target.is_dir() => {}
                    Ok(_) => files.push(path),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("{}: {e}", path.display())),
                }
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Whether a load of `root` reads `path` (or, for a directory, looks
/// into it), by its name alone: `root` itself, or a path below the
/// directory `root` none of whose names below it is hidden (begins with
/// `.`: an editor's lock or copy, `.#api.yaml`, `.api.yaml.swp`, a
/// Kubernetes ConfigMap's `..data` and `..2024_…` directories), as
/// upstream's loader with `RUNTIME_IGNOREDOTFILES` (which its README
/// asks for with ConfigMaps).
pub(crate) fn is_config_file(root: &Path, path: &Path) -> bool {
    let (root, path) = (lexical(root), lexical(path));
    match path.strip_prefix(&root) {
        Ok(below) => below
            .components()
            .all(|name| !name.as_os_str().as_encoded_bytes().starts_with(b".")),
        Err(_) => false,
    }
}

/// Whether a change at `path` (a file written, made, renamed or removed)
/// may change what a load of `root` reads: one of [`is_config_file`]'s,
/// or a Kubernetes ConfigMap's swap, which renames a new `..data` link
/// over the old in `root`'s directory (or the directory `root` is in) and
/// touches no visible name. An editor's hidden files, a log or a state
/// file written elsewhere are not changes.
pub(crate) fn is_config_change(root: &Path, path: &Path) -> bool {
    if is_config_file(root, path) {
        return true;
    }
    let dir = if root.is_dir() {
        lexical(root)
    } else {
        lexical(root.parent().unwrap_or(Path::new(".")))
    };
    lexical(path)
        .strip_prefix(&dir)
        .ok()
        .and_then(|below| below.components().next())
        .is_some_and(|name| name.as_os_str().as_encoded_bytes().starts_with(b".."))
}

/// `path` absolute (from the working directory) without `.` components,
/// so that `./a.yaml` and `a.yaml` compare equal; links and `..` are left
/// as they are.
pub(super) fn lexical(path: &Path) -> PathBuf {
    let absolute = if path.is_relative() {
        std::env::current_dir().map_or_else(|_| path.to_path_buf(), |dir| dir.join(path))
    } else {
        path.to_path_buf()
    };
    absolute
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}
