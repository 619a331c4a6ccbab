//! A journal and an outbox damaged on disk, as an independent tester
//! damaged them: the files of one real run (`iomsg server --journal` and
//! `iomsg client --outbox` over UCX on loopback, the client SIGKILLed
//! with messages held), changed one way per row of [`CASES`], and opened
//! again. Each row names its outcome: refused (the error names the file
//! and the offset, nothing on disk changes, and the real command exits 1
//! saying so), the torn tail cut (its bytes kept in `FILE.torn-OFFSET`),
//! or opened whole.
//!
//! To add a case, add a row: the file, how to change it (a function of
//! the file's frames) and the outcome.

// Test setup that fails should stop the test where it failed.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::OnceLock;
use std::time::Duration;

use iomsg_lab::durable::{self, SyncPolicy, Torn, COMPACT_OVER, FRAME_HEADER};
use iomsg_lab::journal::{Journal, BATCH_MAGIC};
use iomsg_lab::outbox::{Outbox, OutboxJob, OUTBOX_MAGIC};
mod procs;

use procs::{free_port, one_at_a_time, Proc};

/// Which file a case changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Journal,
    Outbox,
}

impl Kind {
    /// The file's name in its directory.
    fn file(self) -> &'static str {
        match self {
            Kind::Journal => "journal",
            Kind::Outbox => "outbox",
        }
    }

    fn magic(self) -> [u8; 4] {
        match self {
            Kind::Journal => BATCH_MAGIC,
            Kind::Outbox => OUTBOX_MAGIC,
        }
    }

    /// Opens the file in `dir` as the server or the client does: the
    /// frames kept and the torn tail cut, or the error.
    fn open(self, dir: &Path) -> Result<(u64, Option<Torn>), String> {
        match self {
            Kind::Journal => {
                let (_j, rec) = Journal::open(dir, SyncPolicy::None, COMPACT_OVER)?;
                Ok((rec.batches, rec.torn))
            }
            Kind::Outbox => {
                let job = OutboxJob {
                    dir: dir.to_path_buf(),
                    sync: SyncPolicy::None,
                    compact_over: COMPACT_OVER,
                };
                let (_o, stored) = Outbox::open(&job)?;
                Ok((stored.entries, stored.torn))
            }
        }
    }

    /// The real command on the file in `dir`, which must refuse it
    /// before it serves or connects: its exit status and output.
    fn refused_by_iomsg(self, dir: &Path, out: PathBuf) -> (ExitStatus, String) {
        let addr = format!("127.0.0.1:{}", free_port());
        let d = dir.to_str().unwrap();
        let args: Vec<&str> = match self {
            Kind::Journal => vec!["server", "--listen", &addr, "--journal", d],
            Kind::Outbox => vec!["client", &addr, "--outbox", d, "-i", "1"],
        };
        let mut p = Proc::start(&args, out);
        let st = p.wait(Duration::from_secs(20));
        (st, p.text())
    }
}

/// A file of the real run and where its frames start.
struct Layout {
    bytes: Vec<u8>,
    /// The offset of every frame, in order.
    frames: Vec<usize>,
}

impl Layout {
    fn of(kind: Kind, bytes: Vec<u8>) -> Layout {
        let mut frames = Vec::new();
        let mut at = 0;
        while let Some((_, next)) = durable::next_frame(kind.magic(), &bytes, at) {
            frames.push(at);
            at = next;
        }
        assert_eq!(at, bytes.len(), "the real run's {kind:?} is whole");
        assert!(frames.len() >= 8, "{} {kind:?} frames", frames.len());
        Layout { bytes, frames }
    }

    /// The frame that holds byte `at`: its offset and its end.
    fn frame_at(&self, at: usize) -> (usize, usize) {
        let i = self.frames.partition_point(|&f| f <= at) - 1;
        (self.frames[i], self.end(i))
    }

    fn end(&self, i: usize) -> usize {
        self.frames.get(i + 1).copied().unwrap_or(self.bytes.len())
    }

    fn last(&self) -> usize {
        self.frames.len() - 1
    }

    /// Frame `i` with one payload byte flipped; the frame's offset.
    fn flip_in(&self, i: usize) -> Changed {
        let (at, end) = (self.frames[i], self.end(i));
        let mut bytes = self.bytes.clone();
        bytes[at + FRAME_HEADER + (end - at - FRAME_HEADER) / 2] ^= 0x20;
        Changed { bytes, at }
    }

    /// The file cut `into` bytes into frame `i`.
    fn cut_in(&self, i: usize, into: usize) -> Changed {
        let at = self.frames[i];
        Changed {
            bytes: self.bytes[..at + into].to_vec(),
            at,
        }
    }

    /// The file with `tail` appended.
    fn appended(&self, tail: &[u8]) -> Changed {
        let mut bytes = self.bytes.clone();
        bytes.extend_from_slice(tail);
        Changed {
            at: self.bytes.len(),
            bytes,
        }
    }
}

/// A changed file, and the offset its outcome must name.
struct Changed {
    bytes: Vec<u8>,
    at: usize,
}

/// What opening a changed file must do.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Refused: the error names the file, `at offset AT` and this text;
    /// nothing on disk changes; `iomsg` exits 1 with that error.
    Refused(&'static str),
    /// The tail from `at` cut, its flaw named with this text and its
    /// bytes kept in `FILE.torn-AT`.
    Cut(&'static str),
    /// Opened as it is, nothing cut: the frames before `at` kept.
    Opens,
}

/// One case: a file of the real run, how it is changed, the outcome.
struct Case {
    name: &'static str,
    file: Kind,
    change: fn(&Layout) -> Changed,
    expect: Expect,
}

const CHECKSUM: &str = "a checksum mismatch in a complete frame";

const CASES: &[Case] = &[
    Case {
        name: "journal: a byte flipped early (the second batch)",
        file: Kind::Journal,
        change: |l| l.flip_in(1),
        expect: Expect::Refused(CHECKSUM),
    },
    Case {
        name: "journal: a byte flipped mid-file",
        file: Kind::Journal,
        change: |l| l.flip_in(l.frames.len() / 2),
        expect: Expect::Refused(CHECKSUM),
    },
    Case {
        name: "journal: a byte flipped in the last batch",
        file: Kind::Journal,
        change: |l| l.flip_in(l.last()),
        expect: Expect::Refused(CHECKSUM),
    },
    Case {
        name: "journal: a middle batch's length changed",
        file: Kind::Journal,
        change: |l| {
            let at = l.frames[l.frames.len() / 2];
            let mut bytes = l.bytes.clone();
            bytes[at + 6] ^= 1;
            Changed { bytes, at }
        },
        expect: Expect::Refused("valid frame"),
    },
    Case {
        name: "journal: a batch whose checksum holds but does not parse",
        file: Kind::Journal,
        change: |l| {
            let (at, end) = l.frame_at(l.bytes.len() / 3);
            let mut bytes = l.bytes[..at].to_vec();
            durable::frame(BATCH_MAGIC, &[0xff; 20], &mut bytes);
            bytes.extend_from_slice(&l.bytes[end..]);
            Changed { bytes, at }
        },
        expect: Expect::Refused("its payload is not a batch"),
    },
    Case {
        name: "journal: a stretch spliced out mid-file",
        file: Kind::Journal,
        change: |l| {
            let (at, _) = l.frame_at(l.bytes.len() / 3);
            let (later, _) = l.frame_at(l.bytes.len() * 2 / 3);
            let mut bytes = l.bytes[..at + 9].to_vec();
            bytes.extend_from_slice(&l.bytes[later + 5..]);
            Changed { bytes, at }
        },
        expect: Expect::Refused("valid frame"),
    },
    Case {
        name: "journal: cut mid-frame in the last batch (a torn write)",
        file: Kind::Journal,
        change: |l| l.cut_in(l.last(), FRAME_HEADER + 3),
        expect: Expect::Cut("an incomplete frame"),
    },
    Case {
        name: "journal: cut mid-frame mid-file (a truncation)",
        file: Kind::Journal,
        change: |l| l.cut_in(l.frames.len() / 2, 7),
        expect: Expect::Cut("an incomplete frame"),
    },
    Case {
        name: "journal: cut at a frame boundary",
        file: Kind::Journal,
        change: |l| l.cut_in(l.frames.len() / 2, 0),
        expect: Expect::Opens,
    },
    Case {
        name: "journal: garbage appended",
        file: Kind::Journal,
        change: |l| l.appended(b"garbage, not a batch: \x01\x02\x03 and more of it"),
        expect: Expect::Cut("bad magic"),
    },
    Case {
        name: "journal: zeros appended",
        file: Kind::Journal,
        change: |l| l.appended(&[0; 4096]),
        expect: Expect::Cut("bad magic"),
    },
    Case {
        name: "outbox: a byte flipped in the identity",
        file: Kind::Outbox,
        change: |l| l.flip_in(0),
        expect: Expect::Refused(CHECKSUM),
    },
    Case {
        name: "outbox: the identity entry taken out",
        file: Kind::Outbox,
        change: |l| Changed {
            bytes: l.bytes[l.end(0)..].to_vec(),
            at: 0,
        },
        expect: Expect::Refused("not the identity"),
    },
    Case {
        name: "outbox: a byte flipped in the last entry",
        file: Kind::Outbox,
        change: |l| l.flip_in(l.last()),
        expect: Expect::Refused(CHECKSUM),
    },
    Case {
        name: "outbox: cut mid-entry in the last (a torn write)",
        file: Kind::Outbox,
        change: |l| l.cut_in(l.last(), 5),
        expect: Expect::Cut("an incomplete frame"),
    },
    Case {
        name: "outbox: garbage appended",
        file: Kind::Outbox,
        change: |l| l.appended(&[0xa5; 100]),
        expect: Expect::Cut("bad magic"),
    },
];

#[test]
fn every_damage_case_has_its_named_outcome() {
    let _one = one_at_a_time();
    let run = real_run();
    let base = scratch("cases");
    let mut refusals = 0;
    for (k, case) in CASES.iter().enumerate() {
        let layout = match case.file {
            Kind::Journal => &run.journal,
            Kind::Outbox => &run.outbox,
        };
        let changed = (case.change)(layout);
        let dir = base.join(format!("case-{k}"));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(case.file.file());
        std::fs::write(&path, &changed.bytes).unwrap();
        let before = snapshot(&dir);
        let got = case.file.open(&dir);
        let name = case.name;
        match case.expect {
            Expect::Refused(says) => {
                let err = got.err().unwrap_or_else(|| panic!("{name}: not refused"));
                let named = format!("{} is damaged at offset {}", path.display(), changed.at);
                assert!(err.contains(&named), "{name}: {named:?} not in {err}");
                assert!(err.contains(says), "{name}: {says:?} not in {err}");
                assert!(err.contains("left as it is"), "{name}: {err}");
                assert_eq!(snapshot(&dir), before, "{name}: the disk changed");
                let (st, text) = case
                    .file
                    .refused_by_iomsg(&dir, base.join(format!("{k}.out")));
                assert_eq!(st.code(), Some(1), "{name}: {text}");
                assert!(text.contains(&named), "{name}: {text}");
                assert_eq!(snapshot(&dir), before, "{name}: iomsg changed the disk");
                refusals += 1;
            }
            Expect::Cut(why) => {
                let (kept, torn) = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                let t = torn.unwrap_or_else(|| panic!("{name}: nothing cut"));
                let tail = &changed.bytes[changed.at..];
                assert_eq!(t.offset, changed.at as u64, "{name}");
                assert_eq!(t.len, tail.len() as u64, "{name}");
                assert!(t.flaw.to_string().contains(why), "{name}: {}", t.flaw);
                let evidence = dir.join(format!("{}.torn-{}", case.file.file(), changed.at));
                assert_eq!(t.evidence, evidence, "{name}");
                assert_eq!(std::fs::read(&evidence).unwrap(), tail, "{name}");
                let on_disk = std::fs::read(&path).unwrap();
                assert_eq!(on_disk, &changed.bytes[..changed.at], "{name}");
                let frames = layout.frames.partition_point(|&f| f < changed.at);
                assert_eq!(kept, frames as u64, "{name}: frames kept");
            }
            Expect::Opens => {
                let (kept, torn) = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(torn.is_none(), "{name}: {torn:?}");
                let frames = layout.frames.partition_point(|&f| f < changed.at);
                assert_eq!(kept, frames as u64, "{name}: frames kept");
                assert_eq!(snapshot(&dir), before, "{name}: the disk changed");
            }
        }
    }
    assert!(refusals >= 8);
    std::fs::remove_dir_all(&base).unwrap();
}

#[test]
fn a_held_directory_admits_no_second_opener_whatever_becomes_of_its_files() {
    let _one = one_at_a_time();
    let dir = scratch("lock");
    let journal = dir.join("journal");
    std::fs::create_dir_all(&journal).unwrap();
    // A lock file an older version left.
    std::fs::write(journal.join("lock"), b"").unwrap();
    let (mut held, _) = Journal::open(&journal, SyncPolicy::None, COMPACT_OVER).unwrap();
    for e in std::fs::read_dir(&journal).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let err = Journal::open(&journal, SyncPolicy::None, COMPACT_OVER).unwrap_err();
    assert!(err.contains("is in use: another process holds"), "{err}");
    // Compaction renames a new file over the journal.
    held.compact(0, || Ok(())).unwrap();
    assert!(Journal::open(&journal, SyncPolicy::None, COMPACT_OVER).is_err());
    drop(held);
    assert!(Journal::open(&journal, SyncPolicy::None, COMPACT_OVER).is_ok());

    let job = OutboxJob {
        dir: dir.join("outbox"),
        sync: SyncPolicy::None,
        compact_over: 0,
    };
    let (mut held, _) = Outbox::open(&job).unwrap();
    held.identity(1, 2);
    held.write().unwrap();
    assert!(held.compact_if_large().unwrap(), "compacted");
    assert!(Outbox::open(&job).unwrap_err().contains("is in use"));
    std::fs::remove_file(job.dir.join("outbox")).unwrap();
    assert!(Outbox::open(&job).unwrap_err().contains("is in use"));
    drop(held);
    assert!(Outbox::open(&job).is_ok());

    // Two processes: the files of a running server removed under it.
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let j = journal.to_str().unwrap();
    let mut first = Proc::start(
        &["server", "--listen", &listen, "--journal", j],
        dir.join("first.out"),
    );
    first.wait_for("listening on", Duration::from_secs(15));
    for e in std::fs::read_dir(&journal).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let listen2 = format!("127.0.0.1:{}", free_port());
    let mut second = Proc::start(
        &["server", "--listen", &listen2, "--journal", j],
        dir.join("second.out"),
    );
    let st = second.wait(Duration::from_secs(15));
    let text = second.text();
    assert_eq!(st.code(), Some(1), "{text}");
    assert!(text.contains("is in use: another process holds"), "{text}");
    assert!(!text.contains("listening on"), "{text}");
    assert!(first.running(), "{}", first.text());
    first.stop();
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- the real run ---------------------------------------------------------

/// The journal and the outbox of one real run, each whole.
struct Run {
    journal: Layout,
    outbox: Layout,
}

/// Made once: a server with a journal, a client with an outbox sending
/// as fast as it can, SIGKILLed with messages held; the server stopped.
/// A tail torn by the kill is cut first (by opening a copy), so that every
/// case starts from whole files.
fn real_run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = scratch("run");
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let (journal, outbox) = (dir.join("journal"), dir.join("outbox"));
        let audit = dir.join("audit");
        let mut s = Proc::start(
            &[
                "server",
                "--listen",
                &listen,
                "--journal",
                journal.to_str().unwrap(),
                "--audit-dir",
                audit.to_str().unwrap(),
                "--audit-name",
                "server-1",
                "--report-interval",
                "0",
            ],
            dir.join("server.out"),
        );
        s.wait_for("listening on", Duration::from_secs(15));
        let mut c = Proc::start(
            &[
                "client",
                &listen,
                "--outbox",
                outbox.to_str().unwrap(),
                "-i",
                "0",
                "--retries",
                "inf",
                "--report-interval",
                "0",
                "--window",
                "64",
                "--conn-window",
                "64",
                "--data-size",
                "64:4K",
            ],
            dir.join("client.out"),
        );
        c.wait_for("session ", Duration::from_secs(15));
        std::thread::sleep(Duration::from_millis(1000));
        c.kill();
        assert!(s.stop().success(), "{}", s.text());
        let whole = |kind: Kind, from: &Path| {
            let copy = dir.join(format!("whole-{}", kind.file()));
            std::fs::create_dir_all(&copy).unwrap();
            let file = kind.file();
            std::fs::copy(from.join(file), copy.join(file)).unwrap();
            kind.open(&copy).unwrap();
            Layout::of(kind, std::fs::read(copy.join(file)).unwrap())
        };
        let run = Run {
            journal: whole(Kind::Journal, &journal),
            outbox: whole(Kind::Outbox, &outbox),
        };
        eprintln!(
            "the real run: a journal of {} batches ({} bytes), an outbox of {} entries ({} bytes)",
            run.journal.frames.len(),
            run.journal.bytes.len(),
            run.outbox.frames.len(),
            run.outbox.bytes.len()
        );
        std::fs::remove_dir_all(&dir).unwrap();
        run
    })
}

// ---- helpers --------------------------------------------------------------

fn scratch(name: &str) -> PathBuf {
    procs::scratch("damage", name)
}

/// Every file in `dir` and its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}
