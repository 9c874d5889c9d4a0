//! `ht hyperspace`: a small shell on a Hyperspace session (ls, mkdir, rm, attr, open, lock,
//! status), on a replicated service (`--hyperspace ADDR,...`) or on a single in-process replica
//! in a data directory (`--embedded`).

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use hyperspace::client::{ClientEvent, ClientOptions, Hyperspace, LocalChannel};
use hyperspace::command::{LockMode, event_mask, flags};
use hyperspace::node::{Node, NodeConfig};
use rpc::ClusterCredentials;

#[derive(Args)]
pub struct HyperspaceShellArgs {
    /// Replica addresses, comma-separated.
    #[arg(long, value_delimiter = ',')]
    hyperspace: Vec<SocketAddr>,
    /// Run a single replica in this process on `<data-dir>/hyperspace/embedded`.
    #[arg(long)]
    embedded: bool,
    /// The cluster data directory (credentials in `<dir>/tls`).
    #[arg(long = "data-dir", default_value = "./ht-data")]
    data_dir: PathBuf,
    /// Commands to run (`;`-separated) instead of reading standard input.
    #[arg(short = 'e', long = "execute")]
    execute: Option<String>,
}

const HELP: &str = "\
commands:
  ls PATH                      list a directory
  mkdir [-p] PATH              make a directory (-p: with parents)
  rm PATH                      delete a file or an empty directory
  exists PATH                  does the node exist
  create PATH                  create an empty file
  attr get PATH NAME | attr set PATH NAME VALUE | attr del PATH NAME | attr list PATH
  attr incr PATH NAME [DELTA]  add to a decimal attribute
  open PATH [lock] [create] [excl] [temp]   open a handle (printed)
  close HANDLE
  lock HANDLE [shared|exclusive]            wait for the lock, print its generation
  trylock HANDLE [shared|exclusive]
  unlock HANDLE                release the handle's lock
  sequencer HANDLE
  sessions                     live sessions
  status                       leader, term, commit index of the replica answering
  member add ID HOST:PORT      add a replica (started with `ht serve hyperspace --join`)
  member remove ID             remove a replica
  help | quit";

pub fn run(args: HyperspaceShellArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let (hs, mut events, node) = if args.embedded {
            let dir = args.data_dir.join("hyperspace").join("embedded");
            let node = Node::start(
                NodeConfig::single(dir.clone()),
                Arc::new(hyperspace::node::NoPeers),
            )
            .with_context(|| format!("cannot open hyperspace in {}", dir.display()))?;
            let (hs, events) = Hyperspace::open_session(
                Arc::new(LocalChannel::new(node.clone())),
                ClientOptions::default(),
            )
            .await?;
            (hs, events, Some(node))
        } else {
            if args.hyperspace.is_empty() {
                bail!("give --hyperspace ADDR,... or --embedded");
            }
            let creds = ClusterCredentials::load(&args.data_dir, "client").with_context(|| {
                format!(
                    "cannot load client credentials from {} (run `ht init`)",
                    args.data_dir.display()
                )
            })?;
            let (hs, events) =
                Hyperspace::connect(args.hyperspace.clone(), creds, ClientOptions::default())
                    .await?;
            (hs, events, None)
        };
        // Print events as they come (between commands).
        tokio::spawn(async move {
            while let Some(e) = events.recv().await {
                match e {
                    ClientEvent::Node(ev) => eprintln!(
                        "event: handle {} {} {}",
                        ev.handle,
                        event_name(ev.kind),
                        ev.name
                    ),
                    other => eprintln!("event: {other:?}"),
                }
            }
        });
        let lines: Vec<String> = match &args.execute {
            Some(text) => text.split(';').map(|s| s.trim().to_string()).collect(),
            None => Vec::new(),
        };
        let interactive = args.execute.is_none();
        let mut stdin = std::io::stdin().lock();
        let mut i = 0;
        loop {
            let line = if interactive {
                print!("hyperspace> ");
                std::io::stdout().flush()?;
                let mut l = String::new();
                if stdin.read_line(&mut l)? == 0 {
                    break;
                }
                l
            } else {
                if i >= lines.len() {
                    break;
                }
                i += 1;
                lines[i - 1].clone()
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.is_empty() {
                continue;
            }
            if matches!(words[0], "quit" | "exit") {
                break;
            }
            let result = if words[0] == "member" {
                member(&args, &words).await
            } else {
                execute(&hs, &words).await
            };
            match result {
                Ok(out) => {
                    if !out.is_empty() {
                        println!("{out}");
                    }
                }
                Err(e) => {
                    println!("error: {e:#}");
                    if !interactive {
                        hs.close_session().await.ok();
                        std::process::exit(1);
                    }
                }
            }
        }
        hs.close_session().await.ok();
        if let Some(node) = node {
            node.stop().await;
        }
        anyhow::Ok(())
    })
}

/// `member add ID ADDR` / `member remove ID`: a Raft configuration change, asked of the
/// replicas with their own credentials (membership is not a client operation).
async fn member(args: &HyperspaceShellArgs, words: &[&str]) -> anyhow::Result<String> {
    if args.embedded {
        bail!("member: the embedded replica is a group of one");
    }
    let add = match arg(words, 1, "add|remove")? {
        "add" => true,
        "remove" => false,
        other => bail!("member {other}: say add or remove"),
    };
    let id: u64 = arg(words, 2, "ID")?
        .parse()
        .context("member: ID is a number")?;
    let addr = if add { arg(words, 3, "HOST:PORT")? } else { "" };
    let creds = ClusterCredentials::load(&args.data_dir, hyperspace::service::SERVER_NAME)
        .context("member: needs the hyperspace certificate of the data directory")?;
    hyperspace::launch::change_member(
        &args.hyperspace,
        &creds,
        add,
        id,
        addr,
        std::time::Duration::from_secs(30),
    )
    .await
    .map_err(anyhow::Error::msg)?;
    Ok(format!(
        "replica {id} {}",
        if add { "added" } else { "removed" }
    ))
}

fn event_name(kind: u32) -> &'static str {
    match kind {
        event_mask::ATTR_SET => "attr-set",
        event_mask::ATTR_DEL => "attr-del",
        event_mask::CHILD_NODE_ADDED => "child-added",
        event_mask::CHILD_NODE_REMOVED => "child-removed",
        event_mask::LOCK_ACQUIRED => "lock-acquired",
        event_mask::LOCK_RELEASED => "lock-released",
        event_mask::LOCK_GRANTED => "lock-granted",
        _ => "unknown",
    }
}

fn arg<'a>(words: &[&'a str], i: usize, what: &str) -> anyhow::Result<&'a str> {
    words
        .get(i)
        .copied()
        .with_context(|| format!("{}: missing {what} (see help)", words[0]))
}

fn handle_arg(words: &[&str], i: usize) -> anyhow::Result<u64> {
    let h = arg(words, i, "HANDLE")?;
    h.parse()
        .with_context(|| format!("{}: {h:?} is not a handle number", words[0]))
}

fn mode_arg(words: &[&str], i: usize) -> anyhow::Result<LockMode> {
    match words.get(i).copied() {
        None | Some("exclusive") | Some("x") => Ok(LockMode::Exclusive),
        Some("shared") | Some("s") => Ok(LockMode::Shared),
        Some(other) => bail!("lock mode {other:?}: say shared or exclusive"),
    }
}

/// Runs one shell command and returns what to print.
pub async fn execute(hs: &Hyperspace, words: &[&str]) -> anyhow::Result<String> {
    Ok(match words[0] {
        "help" => HELP.to_string(),
        "ls" => {
            let path = words.get(1).copied().unwrap_or("/");
            hs.readdir(path)
                .await?
                .into_iter()
                .map(|e| {
                    if e.is_dir {
                        format!("{}/", e.name)
                    } else {
                        e.name
                    }
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        "mkdir" => {
            if words.get(1) == Some(&"-p") {
                hs.mkdirs(arg(words, 2, "PATH")?).await?;
            } else {
                hs.mkdir(arg(words, 1, "PATH")?).await?;
            }
            String::new()
        }
        "rm" => {
            hs.delete(arg(words, 1, "PATH")?).await?;
            String::new()
        }
        "exists" => hs.exists(arg(words, 1, "PATH")?).await?.to_string(),
        "create" => {
            let h = hs
                .open(arg(words, 1, "PATH")?, flags::CREATE | flags::WRITE, 0)
                .await?;
            hs.close(h).await?;
            String::new()
        }
        "attr" => {
            let sub = arg(words, 1, "get|set|del|list|incr")?;
            let path = arg(words, 2, "PATH")?;
            match sub {
                "get" => match hs.attr_get(path, arg(words, 3, "NAME")?).await? {
                    Some(v) => String::from_utf8_lossy(&v).into_owned(),
                    None => "(none)".to_string(),
                },
                "set" => {
                    let value = words.get(4..).map(|w| w.join(" ")).unwrap_or_default();
                    hs.attr_set(path, arg(words, 3, "NAME")?, value.into_bytes())
                        .await?;
                    String::new()
                }
                "del" => {
                    hs.attr_del(path, arg(words, 3, "NAME")?).await?;
                    String::new()
                }
                "list" => hs.attr_list(path).await?.join("\n"),
                "incr" => {
                    let delta = match words.get(4) {
                        Some(d) => d.parse().with_context(|| format!("bad delta {d:?}"))?,
                        None => 1,
                    };
                    hs.attr_incr(path, arg(words, 3, "NAME")?, delta)
                        .await?
                        .to_string()
                }
                other => bail!("attr {other}: say get, set, del, list or incr"),
            }
        }
        "open" => {
            let path = arg(words, 1, "PATH")?;
            let mut f = flags::READ | flags::WRITE;
            for w in &words[2..] {
                f |= match *w {
                    "lock" => flags::LOCK,
                    "create" => flags::CREATE,
                    "excl" => flags::EXCL,
                    "temp" => flags::TEMP,
                    other => bail!("open: unknown flag {other:?}"),
                };
            }
            let h = hs.open(path, f, event_mask::ALL).await?;
            format!("handle {h}")
        }
        "close" => {
            hs.close(handle_arg(words, 1)?).await?;
            String::new()
        }
        "lock" => {
            let g = hs.lock(handle_arg(words, 1)?, mode_arg(words, 2)?).await?;
            format!("granted, generation {g}")
        }
        "trylock" => match hs
            .try_lock(handle_arg(words, 1)?, mode_arg(words, 2)?)
            .await?
        {
            Some(g) => format!("granted, generation {g}"),
            None => "busy".to_string(),
        },
        "unlock" => {
            hs.release(handle_arg(words, 1)?).await?;
            String::new()
        }
        "sequencer" => {
            let s = hs.sequencer(handle_arg(words, 1)?).await?;
            let mode = LockMode::try_from(s.mode).unwrap_or(LockMode::None);
            format!("{} {:?} generation {}", s.path, mode, s.generation)
        }
        "sessions" => hs
            .list_sessions()
            .await?
            .into_iter()
            .map(|s| {
                format!(
                    "session {} lease {} ms, {} handles",
                    s.id, s.lease_ms, s.handles
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        "status" => {
            let s = hs.status().await?;
            let members: Vec<String> = s
                .members
                .iter()
                .map(|(id, a)| format!("{id}@{a}"))
                .collect();
            format!(
                "replica {} role {} leader {} ({}) term {} commit {} applied {} snapshot {} sessions {} members {}",
                s.id,
                s.role,
                s.leader_id,
                s.leader_addr,
                s.term,
                s.commit,
                s.applied,
                s.snapshot_index,
                s.sessions,
                members.join(",")
            )
        }
        other => bail!("unknown command {other:?} (try help)"),
    })
}
