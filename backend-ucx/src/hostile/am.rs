//! The active-message modes: what a peer can make UCX hand the server
//! before it has proved anything (ids, header lengths, the reply flag,
//! messages before the opening exchange, rendezvous messages at once).

use super::*;

/// Active messages one burst of `am-ids`, `am-headers` or `am-no-reply`
/// sends at most.
const AMS_PER_BURST: usize = 512;
/// The ids `am-ids` always tries: the edges of UCX's handler table (it
/// grows to the highest id registered) and of the 16-bit id.
const EDGE_IDS: [u32; 18] = [
    1, 2, 3, 255, 256, 1023, 4095, 8191, 8192, 8193, 16383, 16384, 16385, 32767, 32768, 49152,
    65534, 65535,
];
/// The user-header lengths `am-headers` tries.
const HEADER_LENS: [usize; 14] = [0, 1, 4, 7, 9, 16, 20, 21, 22, 64, 255, 256, 1024, 4000];
/// Connections `am-rendezvous` sends on at once, and messages on each.
const RNDV_CONNS: usize = 4;
const RNDV_PER_CONN: usize = 8;
/// Connections one burst of `am-early` opens.
const EARLY_CONNS: usize = 16;

impl Attacker {
    /// A header the server may take for one of its own: the transport's
    /// 8-byte key (of the connection `slot`, or a random one), or an io
    /// message of io_demo's for `data_size` bytes.
    fn am_header(&mut self, slot: usize, data_size: u64) -> Vec<u8> {
        match self.protocol {
            Protocol::Iomsg => {
                let key = if self.rng.below(2) == 0 {
                    self.server_key_of(slot)
                } else {
                    self.key()
                };
                tag(key, KIND_FRAME).to_le_bytes().to_vec()
            }
            Protocol::IoDemo => {
                let msg = iomsg_core::iodemo::IoDemoMsg {
                    conn_id: self.rng.next_u64(),
                    data_size,
                    sn: self.rng.next_u64() as u32,
                    op: if self.rng.below(2) == 0 {
                        iomsg_core::iodemo::Op::Write
                    } else {
                        iomsg_core::iodemo::Op::Read
                    },
                };
                let mut h = vec![0; iomsg_core::iodemo::DEFAULT_MSG_LEN];
                msg.encode(&mut h);
                h
            }
        }
    }

    /// Data the server may take for one of its messages: a frame of
    /// iomsg's, or random bytes.
    fn am_data(&mut self, len: usize) -> Vec<u8> {
        match self.protocol {
            Protocol::Iomsg if self.rng.below(2) == 0 => self.plausible(),
            _ => self.bytes(len),
        }
    }

    /// Sends `am` on `id` from the main peer's connection `slot`, and
    /// progresses once.
    fn am_send(&mut self, slot: usize, id: u32, am: AmOut) -> bool {
        let Attacker { main, tally, .. } = self;
        let Some(p) = main.as_mut() else { return false };
        let going = p.send_am(slot, id, am, tally);
        p.progress(tally);
        going
    }

    pub(super) fn am_ids(&mut self, until: Instant) {
        let Some(s) = self.own(Mode::AmIds, until) else {
            return;
        };
        for i in 0..AMS_PER_BURST {
            if Instant::now() >= until {
                break;
            }
            let id = match EDGE_IDS.get(i) {
                Some(&id) => id,
                None => 1 + self.rng.below(u64::from(u16::MAX)) as u32,
            };
            let header = self.am_header(s, 64);
            let n = self.rng.below(256) as usize;
            let data = AmBytes::Own(self.am_data(n));
            let flags = if i % 2 == 0 {
                sys::UCP_AM_SEND_FLAG_REPLY
            } else {
                0
            };
            self.am_send(
                s,
                id,
                AmOut {
                    header,
                    data,
                    flags,
                },
            );
        }
    }

    pub(super) fn am_headers(&mut self, until: Instant) {
        let Some(s) = self.own(Mode::AmHeaders, until) else {
            return;
        };
        for i in 0..AMS_PER_BURST {
            if Instant::now() >= until {
                break;
            }
            let len = HEADER_LENS[i % HEADER_LENS.len()];
            // What the server's own header would be, cut or padded to
            // `len`, or random bytes.
            let mut header = if self.rng.below(2) == 0 {
                self.am_header(s, 64)
            } else {
                self.bytes(len)
            };
            header.resize(len, 0xa5);
            let n = self.rng.below(512) as usize;
            let data = AmBytes::Own(self.am_data(n));
            let flags = self.protocol.am_flags();
            self.am_send(
                s,
                AM_ID,
                AmOut {
                    header,
                    data,
                    flags,
                },
            );
        }
    }

    pub(super) fn am_no_reply(&mut self, until: Instant) {
        let Some(s) = self.own(Mode::AmNoReply, until) else {
            return;
        };
        for _ in 0..AMS_PER_BURST {
            if Instant::now() >= until {
                break;
            }
            let n = self.rng.below(256) as usize;
            let header = self.am_header(s, n as u64);
            let data = AmBytes::Own(self.am_data(n));
            self.am_send(
                s,
                AM_ID,
                AmOut {
                    header,
                    data,
                    flags: 0,
                },
            );
        }
    }

    pub(super) fn am_early(&mut self, until: Instant) {
        let server = SockAddr::from(self.addr());
        for _ in 0..EARLY_CONNS {
            if Instant::now() >= until {
                return;
            }
            let key = self.key();
            let s = {
                let Attacker { main, tally, .. } = self;
                let Some(p) = main.as_mut() else { return };
                match p.connect(&server, Mode::AmEarly, key, false, tally) {
                    Some(s) => s,
                    None => continue,
                }
            };
            for k in 0..4u32 {
                let id = if k % 2 == 0 {
                    AM_ID
                } else {
                    1 + self.rng.below(u64::from(u16::MAX)) as u32
                };
                let header = self.am_header(s, 64);
                let data = AmBytes::Own(self.am_data(64));
                let flags = if k < 2 {
                    sys::UCP_AM_SEND_FLAG_REPLY
                } else {
                    0
                };
                self.am_send(
                    s,
                    id,
                    AmOut {
                        header,
                        data,
                        flags,
                    },
                );
            }
            // And tagged messages, small and rendezvous-sized: an active-
            // message server must not trip on the other API either.
            let at = self.big();
            let key = self.key();
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            p.send_tagged(s, tag(key, KIND_FRAME), AmBytes::Own(vec![0x5a; 64]), tally);
            let big = AmBytes::Shared { at, len: 1 << 20 };
            p.send_tagged(s, tag(key, KIND_FRAME), big, tally);
            let wait = until.min(Instant::now() + Duration::from_millis(50));
            p.wait_for(wait, tally, |_| false);
            p.close(s);
        }
    }

    pub(super) fn am_rendezvous(&mut self, until: Instant) {
        let at = self.big();
        let mut slots = Vec::new();
        for n in 0..RNDV_CONNS {
            if let Some(s) = self.own_nth(Mode::AmRendezvous, n, until) {
                slots.push(s);
            }
        }
        for &s in &slots {
            for k in 0..RNDV_PER_CONN {
                if Instant::now() >= until {
                    break;
                }
                let len = (256 << 10) + self.rng.below(15 * (256 << 10)) as usize;
                // Half say their true size, half lie (1 byte).
                let said = if k % 2 == 0 { len as u64 } else { 1 };
                let header = self.am_header(s, said);
                let id = if k % 4 == 3 {
                    1 + self.rng.below(u64::from(u16::MAX)) as u32
                } else {
                    AM_ID
                };
                let data = AmBytes::Shared {
                    at: at.wrapping_add(HEADER_LEN),
                    len: len.min(BIG - HEADER_LEN),
                };
                let flags = sys::UCP_AM_SEND_FLAG_RNDV | self.protocol.am_flags();
                let Attacker { main, tally, .. } = self;
                if let Some(p) = main.as_mut() {
                    p.send_am(
                        s,
                        id,
                        AmOut {
                            header,
                            data,
                            flags,
                        },
                        tally,
                    );
                }
            }
        }
        // Until the server took or declined them all, or the burst ends.
        let Attacker { main, tally, .. } = self;
        if let Some(p) = main.as_mut() {
            p.wait_for(until, tally, |p| p.reqs.is_empty());
        }
    }
}
