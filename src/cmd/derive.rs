//! `dshs derive`: the messages the model sees, in surface order, each byte-for-byte the
//! message object stored in the log (§12.1). The surface holds positions only; each message
//! is read back from its line when it is written, so memory does not follow message size.

use std::io::Write;

use anyhow::{Context, Result};

use dshs::log::derive::{DeriveError, Deriver, MessageError};
use dshs::log::json;

use crate::cli::{DeriveArgs, DeriveFormat};
use crate::exit::Outcome;
use crate::render::{escape, markdown};

use super::Env;
use super::fold::{self, Want};

/// What this command's output is like (for the progress bar).
pub fn output(args: &DeriveArgs) -> super::Output {
    super::Output {
        json: args.format != DeriveFormat::Markdown,
        writes_while_reading: false,
    }
}

pub fn run(args: &DeriveArgs, env: &Env, out: &mut dyn Write) -> Result<Outcome> {
    let env = &env.for_output(output(args));
    let want = Want {
        at: args.at,
        lines: true,
        replacements: false,
    };
    let folded = fold::load(&args.file, args.session.as_deref(), &want, env)?;
    let path = folded
        .lines
        .as_deref()
        .context("the log has no file to read messages from")?;
    let mut deriver = Deriver::open(path).with_context(|| {
        format!(
            "cannot reopen {} to read its messages",
            escape(&folded.name)
        )
    })?;
    let mut first = true;
    if args.format == DeriveFormat::Json {
        out.write_all(b"[")?;
    }
    for node in folded.state.surface.iter().filter(|n| n.derives) {
        let bytes = match deriver.message(&node) {
            Ok(b) => b,
            Err(DeriveError::Message {
                seq,
                source: MessageError::Missing(place),
            }) => {
                // validate reports the shape error; there is nothing stored to copy.
                let _ = writeln!(
                    crate::render::diag_stream(),
                    "dshs: warning: seq {seq} ({}) has no `{place}` to derive; skipped",
                    node.kind.type_name()
                );
                continue;
            }
            Err(e) => return Err(folded.reread_failure(&node, &e)),
        };
        match args.format {
            DeriveFormat::Json => {
                out.write_all(if first { b"\n" } else { b",\n" })?;
                out.write_all(&bytes)?;
            }
            DeriveFormat::Ndjson => {
                out.write_all(&bytes)?;
                out.write_all(b"\n")?;
            }
            DeriveFormat::Markdown => {
                let text = String::from_utf8_lossy(&bytes);
                let msg = json::parse(text.as_bytes()).map_err(|why| {
                    let e = DeriveError::Message {
                        seq: node.seq,
                        source: MessageError::NotJson(why.to_string()),
                    };
                    folded.reread_failure(&node, &e)
                })?;
                out.write_all(markdown::message(node.seq, node.kind, &msg).as_bytes())?;
            }
        }
        first = false;
    }
    if args.format == DeriveFormat::Json {
        out.write_all(if first { b"]\n" } else { b"\n]\n" })?;
    }
    Ok(if folded.invalid {
        Outcome::Invalid
    } else {
        Outcome::Success
    })
}
