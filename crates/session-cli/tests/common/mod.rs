//! Helpers shared by the integration tests of the `sessions` binary.

#![allow(clippy::unwrap_used)]

use std::path::Path;

pub(crate) mod plant;

/// Copies the directory tree `src` to `dst` (created), files byte for byte.
#[allow(dead_code)] // Not every test binary copies trees.
pub(crate) fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}
