//! `iomsg soak --exactly-once --journal-faults`: the journal damaged
//! between a server kill and the next instance's start, one fault per
//! kill in a seeded order, each with the outcome it must end in:
//!
//! | fault | what is done to `DIR/journal` | the outcome it must have |
//! |---|---|---|
//! | `cut-commits` | cut back 1 to 3 batches, at a batch's end (a power cut under a lazy sync, an older copy restored) | the instance starts; sns it acknowledged past the cut are named by the clients (`StateLost`), what they send again is announced |
//! | `cut-frame` | cut inside the last batch (a torn write) | the instance starts, saying it cut a torn tail |
//! | `garbage` | bytes appended that are no batch | the instance starts, saying it cut a torn tail |
//! | `flip-early`, `flip-middle`, `flip-last` | one byte changed a tenth of the way in, half way, or in the last batch | the instance refuses to start, naming the journal and the offset; the soak puts the journal back as it was and starts another |
//!
//! The judge then asks every outcome named: a refusal where one was due,
//! a start where one was due, and every duplicate and missing sn one a
//! client announced or named (see [`crate::audit::once::failures`]).

use std::fs;
use std::path::{Path, PathBuf};

use iomsg_core::rng::SplitMix64;
use serde::Serialize;

use crate::durable::FRAME_HEADER;
use crate::journal::BATCH_MAGIC;

/// A fault done to the journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JournalFault {
    /// The last 1 to 3 batches cut off at a batch boundary.
    CutCommits,
    /// Cut inside the last batch.
    CutFrame,
    /// Bytes that are no batch appended.
    Garbage,
    /// One byte changed a tenth of the way in.
    FlipEarly,
    /// One byte changed half way.
    FlipMiddle,
    /// One byte changed in the last batch.
    FlipLast,
}

impl JournalFault {
    /// Every fault, in the order a run cycles through them (shuffled by
    /// the seed within each round).
    pub const ALL: [JournalFault; 6] = [
        JournalFault::CutCommits,
        JournalFault::CutFrame,
        JournalFault::Garbage,
        JournalFault::FlipEarly,
        JournalFault::FlipMiddle,
        JournalFault::FlipLast,
    ];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            JournalFault::CutCommits => "cut-commits",
            JournalFault::CutFrame => "cut-frame",
            JournalFault::Garbage => "garbage",
            JournalFault::FlipEarly => "flip-early",
            JournalFault::FlipMiddle => "flip-middle",
            JournalFault::FlipLast => "flip-last",
        }
    }

    /// Whether the next instance must refuse the journal.
    pub fn must_refuse(self) -> bool {
        matches!(
            self,
            JournalFault::FlipEarly | JournalFault::FlipMiddle | JournalFault::FlipLast
        )
    }
}

/// The faults of a run: the kinds in turn, each round of six shuffled by
/// the seed.
#[derive(Debug)]
pub struct Plan {
    rng: SplitMix64,
    round: Vec<JournalFault>,
}

impl Plan {
    /// The plan of seed `seed`.
    pub fn new(seed: u64) -> Plan {
        Plan {
            rng: SplitMix64::new(seed ^ 0x4a0f_4a0f),
            round: Vec::new(),
        }
    }

    /// The next fault.
    pub fn next_fault(&mut self) -> JournalFault {
        if self.round.is_empty() {
            self.round = JournalFault::ALL.to_vec();
            for i in (1..self.round.len()).rev() {
                let j = (self.rng.next_u64() % (i as u64 + 1)) as usize;
                self.round.swap(i, j);
            }
        }
        self.round.pop().unwrap_or(JournalFault::CutFrame)
    }

    /// A number in `0..n` from the plan's seed.
    fn below(&mut self, n: u64) -> u64 {
        self.rng.next_u64() % n.max(1)
    }
}

/// What a fault did, and what came of it.
#[derive(Clone, Debug, Serialize)]
pub struct Done {
    /// The fault.
    pub fault: JournalFault,
    /// After which server kill (1-based).
    pub after_kill: u32,
    /// The journal's length before.
    pub len_before: u64,
    /// Where it was cut or changed, or where garbage began.
    pub offset: u64,
    /// The journal's length after.
    pub len_after: u64,
    /// The outcome, as the next instance said it (see [`Outcome`]).
    pub outcome: Outcome,
    /// The instance's own words about its journal.
    pub said: String,
}

/// What the next instance did with a damaged journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It refused to start, naming the journal and the offset.
    Refused,
    /// It started and said it cut a torn tail.
    TornTailCut,
    /// It started; what it no longer knows is the clients' to name.
    Started,
    /// Not what the fault must end in: started where it had to refuse,
    /// refused where it had to start, or said nothing of a torn tail.
    Unnamed,
}

/// The journal file of journal directory `dir`.
pub fn journal_file(dir: &Path) -> PathBuf {
    dir.join("journal")
}

/// Where each batch of `bytes` ends, in order (as far as batches read).
fn batch_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 0;
    while let Some((_, next)) = crate::durable::next_frame(BATCH_MAGIC, bytes, at) {
        ends.push(next);
        at = next;
    }
    ends
}

/// Does `fault` to the journal in `dir`, keeping a copy of it as it was
/// (`journal.before-fault`) for the soak to put back after a refusal.
///
/// # Errors
///
/// The journal could not be read, copied or written.
pub fn apply(dir: &Path, fault: JournalFault, plan: &mut Plan) -> Result<(u64, u64, u64), String> {
    let path = journal_file(dir);
    let mut bytes = fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let backup = backup_file(dir);
    fs::write(&backup, &bytes).map_err(|e| format!("{}: {e}", backup.display()))?;
    let before = bytes.len() as u64;
    let ends = batch_ends(&bytes);
    let last_start = ends.len().checked_sub(2).map_or(0, |i| ends[i]);
    let offset = match fault {
        JournalFault::CutCommits => {
            let k = 1 + plan.below(3) as usize;
            let keep = ends.len().saturating_sub(k);
            let at = if keep == 0 { 0 } else { ends[keep - 1] };
            bytes.truncate(at);
            at
        }
        JournalFault::CutFrame => {
            // Inside the last batch: past its start, before its end.
            let end = bytes.len();
            let span = (end - last_start).max(2) as u64;
            let at = last_start + 1 + plan.below(span - 1) as usize;
            bytes.truncate(at.min(end.saturating_sub(1)));
            bytes.len()
        }
        JournalFault::Garbage => {
            let at = bytes.len();
            let n = 1 + plan.below(200) as usize;
            for _ in 0..n {
                // Never the batch magic's first byte: garbage, not a batch.
                let b = (plan.below(255) as u8).wrapping_add(1);
                bytes.push(if b == BATCH_MAGIC[0] { b ^ 0x40 } else { b });
            }
            at
        }
        JournalFault::FlipEarly | JournalFault::FlipMiddle | JournalFault::FlipLast => {
            let at = match fault {
                JournalFault::FlipEarly => bytes.len() / 10,
                JournalFault::FlipMiddle => bytes.len() / 2,
                // In the last batch's payload.
                _ => (last_start + FRAME_HEADER).min(bytes.len().saturating_sub(1)),
            };
            if let Some(b) = bytes.get_mut(at) {
                *b ^= 1 << plan.below(8);
            }
            at
        }
    };
    fs::write(&path, &bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((before, offset as u64, bytes.len() as u64))
}

/// The copy [`apply`] keeps of the journal as it was.
pub fn backup_file(dir: &Path) -> PathBuf {
    dir.join("journal.before-fault")
}

/// Puts the journal back as it was before the fault (after the refusal
/// it had to end in).
///
/// # Errors
///
/// The copy could not be moved back.
pub fn put_back(dir: &Path) -> Result<(), String> {
    let (from, to) = (backup_file(dir), journal_file(dir));
    fs::rename(&from, &to).map_err(|e| format!("cannot put {} back: {e}", from.display()))
}

/// The outcome of `fault` from how the next instance ended (`refused`:
/// it exited without listening) and what it said (`text`, its output).
pub fn judge(fault: JournalFault, refused: bool, text: &str) -> Outcome {
    let said_torn = text.contains("of torn tail cut at offset");
    if fault.must_refuse() {
        // Refused, naming the file and where.
        let named = text.contains("journal") && text.contains("is damaged at offset");
        return if refused && named {
            Outcome::Refused
        } else {
            Outcome::Unnamed
        };
    }
    if refused {
        return Outcome::Unnamed;
    }
    match fault {
        JournalFault::CutFrame | JournalFault::Garbage if said_torn => Outcome::TornTailCut,
        JournalFault::CutFrame | JournalFault::Garbage => Outcome::Unnamed,
        _ => Outcome::Started,
    }
}

/// The lines of `text` about the journal, for the report.
pub fn journal_lines(text: &str) -> String {
    text.lines()
        .filter(|l| l.contains("journal"))
        .take(4)
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::journal::{push_record, Batch};

    fn journal(dir: &Path, batches: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for i in 0..batches {
            let mut recs = Vec::new();
            push_record(&[i as u8; 40], &mut recs);
            Batch::encode(b"/r.records", 24 * i as u64, &recs, &mut out);
        }
        fs::create_dir_all(dir).unwrap();
        fs::write(journal_file(dir), &out).unwrap();
        out
    }

    #[test]
    fn each_fault_does_what_it_says_and_keeps_the_journal_as_it_was() {
        let dir = std::env::temp_dir().join(format!("iomsg-jfault-{}", std::process::id()));
        let mut plan = Plan::new(3);
        for fault in JournalFault::ALL {
            let _ = fs::remove_dir_all(&dir);
            let whole = journal(&dir, 10);
            let ends = batch_ends(&whole);
            let (before, at, after) = apply(&dir, fault, &mut plan).unwrap();
            assert_eq!(before, whole.len() as u64);
            assert_eq!(fs::read(backup_file(&dir)).unwrap(), whole, "{fault:?}");
            let now = fs::read(journal_file(&dir)).unwrap();
            assert_eq!(now.len() as u64, after);
            match fault {
                JournalFault::CutCommits => {
                    assert!(ends[6..9].contains(&(at as usize)), "{at}");
                    assert_eq!(now[..], whole[..at as usize]);
                }
                JournalFault::CutFrame => {
                    assert!(at as usize > ends[8] && (at as usize) < ends[9], "{at}");
                    assert_eq!(now[..], whole[..at as usize]);
                }
                JournalFault::Garbage => {
                    assert_eq!(at, before);
                    assert_eq!(now[..at as usize], whole[..]);
                    assert_eq!(batch_ends(&now), ends, "no batch appended");
                }
                _ => {
                    assert_eq!(now.len(), whole.len());
                    let diff: Vec<usize> = (0..now.len()).filter(|&i| now[i] != whole[i]).collect();
                    assert_eq!(diff, vec![at as usize], "{fault:?}");
                    if fault == JournalFault::FlipLast {
                        assert!(at as usize >= ends[8] + FRAME_HEADER);
                    }
                }
            }
            put_back(&dir).unwrap();
            assert_eq!(fs::read(journal_file(&dir)).unwrap(), whole);
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_round_has_every_fault_once() {
        let mut plan = Plan::new(9);
        let mut round: Vec<&str> = (0..6).map(|_| plan.next_fault().name()).collect();
        round.sort_unstable();
        let mut all: Vec<&str> = JournalFault::ALL.iter().map(|f| f.name()).collect();
        all.sort_unstable();
        assert_eq!(round, all);
    }

    #[test]
    fn outcomes_are_named_only_when_the_instance_said_the_right_thing() {
        let refusal = "iomsg server: the journal /d/journal is damaged at offset 1234: ...";
        assert_eq!(
            judge(JournalFault::FlipMiddle, true, refusal),
            Outcome::Refused
        );
        assert_eq!(
            judge(JournalFault::FlipMiddle, false, "listening"),
            Outcome::Unnamed
        );
        assert_eq!(
            judge(JournalFault::FlipLast, true, "cannot listen"),
            Outcome::Unnamed
        );
        let torn = "journal: 57 bytes of torn tail cut at offset 99 (garbage...), kept in X";
        assert_eq!(
            judge(JournalFault::CutFrame, false, torn),
            Outcome::TornTailCut
        );
        let none = "journal /d/journal (sync none): 1 sessions restored";
        assert_eq!(judge(JournalFault::Garbage, false, none), Outcome::Unnamed);
        assert_eq!(
            judge(JournalFault::CutCommits, false, none),
            Outcome::Started
        );
        assert_eq!(
            judge(JournalFault::CutCommits, true, refusal),
            Outcome::Unnamed
        );
    }
}
