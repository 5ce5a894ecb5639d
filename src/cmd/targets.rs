//! The logs a command over many sessions (`grep`, `usage`) reads from its PATHs: files,
//! session directories, stores and their sessions, storage roots (DSH's when none is given).

use std::path::{Path, PathBuf};

use dshs::log::input;

use crate::render::{diag, escape};

/// A log to read.
pub enum Target {
    Stdin,
    /// A log file or a session directory, named as given (or as found below a root:
    /// `listed`, and it may be gone by the time it is read).
    Path {
        name: String,
        listed: bool,
    },
    /// One session of a SQLite store (`STORE.db#ID`, or each session of `STORE.db`).
    Session {
        path: PathBuf,
        shown: String,
        id: String,
    },
}

/// The logs below the command-line paths (DSH's root when there are none): a file or a
/// session directory is one log, `-` standard input, any other directory a storage root
/// standing for every session below it. A root without sessions is a note; one that cannot
/// be listed an error (counted, the others are still searched).
pub fn targets(paths: &[String], verb: &str) -> Result<(Vec<Target>, u64), String> {
    let given: Vec<String> = if paths.is_empty() {
        let root = crate::cmd::default_root().ok_or(
            "no PATH given and neither DSH_HOME nor HOME is set to find DSH's storage root",
        )?;
        vec![root.display().to_string()]
    } else {
        paths.to_vec()
    };
    let mut out = Vec::new();
    let mut errors = 0;
    for arg in given {
        let path = std::path::Path::new(&arg);
        let store = crate::cmd::store::name(&arg, None).unwrap_or(crate::cmd::store::Named::Log);
        if let crate::cmd::store::Named::Store { path, shown, id } = store {
            let ids = match id {
                Some(id) => Ok(vec![id]),
                None => dshs::log::sqlite::Store::open(&path)
                    .and_then(|s| s.sessions())
                    .map(|s| s.into_iter().map(|i| i.row.id).collect()),
            };
            match ids {
                Ok(ids) => out.extend(ids.into_iter().map(|id| Target::Session {
                    path: path.clone(),
                    shown: shown.clone(),
                    id,
                })),
                Err(e) => {
                    errors += 1;
                    crate::render::error_message(&e.to_string());
                }
            }
        } else if arg == "-" {
            out.push(Target::Stdin);
        } else if path.is_dir() && !input::is_session_dir(path) {
            match input::find_sessions(path) {
                Ok(found) if found.is_empty() => {
                    let strays = input::stray_logs(path, &found);
                    if strays.is_empty() {
                        diag!("dshs: note: no DSH sessions under {}", escape(&arg));
                    }
                    crate::cmd::note_strays(&arg, &strays, false);
                }
                Ok(found) => {
                    // As `validate ROOT` does: the logs the walk leaves out are named.
                    crate::cmd::note_strays(&arg, &input::stray_logs(path, &found), true);
                    out.extend(found.into_iter().map(|p| Target::Path {
                        name: p.display().to_string(),
                        listed: true,
                    }));
                }
                Err(e) => {
                    errors += 1;
                    crate::render::error_message(&format!("cannot list {arg}: {e}"));
                }
            }
        } else if !path.exists() && paths.is_empty() {
            return Err(format!(
                "DSH's storage root {} does not exist (give PATHs to {verb})",
                escape(&arg)
            ));
        } else {
            out.push(Target::Path {
                name: arg,
                listed: false,
            });
        }
    }
    Ok((out, errors))
}

impl Target {
    /// Bytes on disk (for a progress bar): a directory's newest generation.
    pub fn size(&self) -> u64 {
        match self {
            Target::Stdin | Target::Session { .. } => 0,
            Target::Path { name, .. } => input::resolve(Path::new(name))
                .ok()
                .and_then(|f| std::fs::metadata(f).ok())
                .map_or(0, |m| m.len()),
        }
    }
}
