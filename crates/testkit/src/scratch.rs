//! [`Scratch`]: a fresh directory for one test, the one way tests here make their files.

use std::path::{Path, PathBuf};

/// A fresh, empty directory for one test, named after the process and the test (so tests
/// running at once never share one). It is removed when the test passes and kept when it
/// fails, for a look at what was left.
pub struct Scratch(PathBuf);

impl Scratch {
    /// `$TMPDIR/weir-{what}-{pid}`, emptied first.
    pub fn new(what: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("weir-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot make {}: {e}", dir.display()));
        Scratch(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The names in the directory, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

/// A scratch directory reads as its path (`&dir` wherever a `&Path` is asked for).
impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
