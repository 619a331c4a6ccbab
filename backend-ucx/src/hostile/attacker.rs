//! The attacks: one method per [`Mode`], each a bounded burst against
//! the server, tallied per mode.

use super::*;

impl Attacker {
    /// A random key (never zero).
    pub(super) fn key(&mut self) -> u64 {
        (self.rng.next_u64() & KEY_MASK).max(1)
    }

    /// An up connection of the main peer for `mode`: the one it has, or
    /// a new one (waited for until `until`, at most 2 s).
    pub(super) fn own(&mut self, mode: Mode, until: Instant) -> Option<usize> {
        self.own_nth(mode, 0, until)
    }

    /// As [`own`](Self::own), the `n`th of the mode's connections.
    pub(super) fn own_nth(&mut self, mode: Mode, n: usize, until: Instant) -> Option<usize> {
        if let Some(&s) = self.own.get(&(mode, n)) {
            if self.main.as_ref().and_then(|p| p.state(s)) == Some(EpState::Up) {
                return Some(s);
            }
            self.own.remove(&(mode, n));
            if let Some(p) = self.main.as_mut() {
                p.close(s);
            }
        }
        let key = self.key();
        let server = SockAddr::from(self.addr());
        let Attacker { main, tally, .. } = self;
        let p = main.as_mut()?;
        let s = p.connect(&server, mode, key, true, tally)?;
        let until = until.min(Instant::now() + Duration::from_secs(2));
        p.wait_for(until, tally, |p| p.state(s) != Some(EpState::Opening));
        if p.state(s) == Some(EpState::Up) {
            // Heartbeats keep it open for the next bursts (a server closes
            // a silent connection).
            if let Some(ep) = p.eps.get_mut(s).and_then(Option::as_mut) {
                ep.beat = true;
            }
            self.own.insert((mode, n), s);
            Some(s)
        } else {
            p.close(s);
            None
        }
    }

    pub(super) fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub(super) fn server_key_of(&self, slot: usize) -> u64 {
        self.main
            .as_ref()
            .and_then(|p| p.ep(slot))
            .map_or(0, |e| e.server_key)
    }

    pub(super) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.rng.next_u64() as u8).collect()
    }

    /// Progresses the main peer and releases stalled workers whose time
    /// is up.
    pub(super) fn service(&mut self) {
        let Attacker { main, tally, .. } = self;
        if let Some(p) = main.as_mut() {
            p.progress(tally);
        }
        let now = Instant::now();
        let mut i = 0;
        while i < self.stalled.len() {
            if self.stalled[i].release <= now {
                let mut s = self.stalled.swap_remove(i);
                s.peer.teardown(Duration::from_millis(300), &mut self.tally);
            } else {
                i += 1;
            }
        }
    }

    pub(super) fn burst(&mut self, mode: Mode, until: Instant) {
        self.tally[mode.index()].bursts += 1;
        match mode {
            Mode::RandomTags => self.random_tags(until),
            Mode::WrongKeys => self.wrong_keys(until),
            Mode::GuessKeys => self.guess_keys(until),
            Mode::Truncated => self.truncated(until),
            Mode::Oversized => self.oversized(until),
            Mode::StallMidMessage => self.stall(until, false),
            Mode::DieMidMessage => self.stall(until, true),
            Mode::StreamGarbage => self.stream_garbage(until),
            Mode::BadKeyExchange => self.bad_key_exchange(until),
            Mode::ConnectClose => self.connect_close(until),
            Mode::SilentConnect => self.silent_connect(until),
            Mode::Flood => self.flood(until),
            Mode::AmIds => self.am_ids(until),
            Mode::AmHeaders => self.am_headers(until),
            Mode::AmNoReply => self.am_no_reply(until),
            Mode::AmEarly => self.am_early(until),
            Mode::AmRendezvous => self.am_rendezvous(until),
        }
        // What is left of the burst: the server answers (polled gently:
        // the server and its good clients need the processor more).
        while Instant::now() < until {
            self.service();
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    pub(super) fn random_tags(&mut self, until: Instant) {
        let Some(s) = self.own(Mode::RandomTags, until) else {
            return;
        };
        for _ in 0..MESSAGES_PER_BURST {
            if Instant::now() >= until {
                break;
            }
            let tag = self.rng.next_u64();
            let len = self.rng.below(4096) as usize;
            let bytes = self.bytes(len);
            let Attacker { main, tally, .. } = self;
            if let Some(p) = main.as_mut() {
                p.send_own(s, tag, bytes, tally);
                p.progress(tally);
            }
        }
    }

    /// A frame a server may take for a real one, or garbage.
    pub(super) fn plausible(&mut self) -> Vec<u8> {
        let session = self.rng.next_u64();
        match self.rng.below(4) {
            0 => hello(session),
            1 => frame(
                session,
                self.rng.below(1000),
                false,
                Body::Write { data: &[0xab; 100] },
            ),
            2 => frame(session, 0, false, Body::Bye),
            _ => {
                let n = 1 + self.rng.below(200) as usize;
                self.bytes(n)
            }
        }
    }

    pub(super) fn wrong_keys(&mut self, until: Instant) {
        let Some(s) = self.own(Mode::WrongKeys, until) else {
            return;
        };
        let ours = self.server_key_of(s);
        for _ in 0..MESSAGES_PER_BURST {
            if Instant::now() >= until {
                break;
            }
            let mut key = self.key();
            if key == ours {
                key ^= 1 << 20;
            }
            let kind = self.rng.below(3);
            let body = match kind {
                KIND_HEARTBEAT => Vec::new(),
                KIND_BATCH => {
                    let (a, b) = (self.plausible(), self.plausible());
                    batch(&[&a, &b])
                }
                _ => self.plausible(),
            };
            let Attacker { main, tally, .. } = self;
            if let Some(p) = main.as_mut() {
                p.send_own(s, tag(key, kind), body, tally);
                p.progress(tally);
            }
        }
    }

    pub(super) fn guess_keys(&mut self, until: Instant) {
        let Some(s) = self.own(Mode::GuessKeys, until) else {
            return;
        };
        let ours = self.server_key_of(s);
        let mut keys: Vec<u64> = (1..=16u64)
            .flat_map(|d| [ours.wrapping_add(d), ours.wrapping_sub(d)])
            .chain(1..=32)
            .map(|k| k & KEY_MASK)
            .filter(|&k| k != 0 && k != ours)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            if Instant::now() >= until {
                break;
            }
            // Malformed (the victim would be closed for it) or a frame of
            // another session.
            let body = if self.rng.below(2) == 0 {
                let mut f = hello(self.rng.next_u64());
                f[0] ^= 0xff;
                f
            } else {
                self.plausible()
            };
            let Attacker { main, tally, .. } = self;
            if let Some(p) = main.as_mut() {
                p.send_own(s, tag(key, KIND_FRAME), body, tally);
                p.progress(tally);
            }
        }
    }

    /// A frame that lies about itself, and the kind to send it as.
    pub(super) fn lie(&mut self) -> (u64, Vec<u8>) {
        let session = self.rng.next_u64();
        let write = |n: usize| frame(session, 0, true, Body::Write { data: &vec![7; n] });
        match self.rng.below(8) {
            // Shorter than its header says.
            0 => {
                let mut f = write(1000);
                f.truncate(HEADER_LEN + 10);
                (KIND_FRAME, f)
            }
            // Half a header.
            1 => {
                let f = hello(session);
                (KIND_FRAME, f[..HEADER_LEN / 2].to_vec())
            }
            // A bad header CRC.
            2 => {
                let mut f = hello(session);
                f[HEADER_CRC_AT] ^= 0x55;
                (KIND_FRAME, f)
            }
            // A sealed header whose length is past the message's end.
            3 => {
                let mut f = write(64);
                f[DATA_LEN_AT..DATA_LEN_AT + 4].copy_from_slice(&(1u32 << 19).to_le_bytes());
                reseal(&mut f);
                (KIND_FRAME, f)
            }
            // A sealed header whose length is past the wire's largest.
            4 => {
                let mut f = write(64);
                f[DATA_LEN_AT..DATA_LEN_AT + 4].copy_from_slice(&u32::MAX.to_le_bytes());
                reseal(&mut f);
                (KIND_FRAME, f)
            }
            // A bad payload CRC.
            5 => {
                let mut f = hello(session);
                f[PAYLOAD_CRC_AT] ^= 0x55;
                reseal(&mut f);
                (KIND_FRAME, f)
            }
            // A batch whose second length runs past its end.
            6 => {
                let h = hello(session);
                let mut b = batch(&[&h]);
                b.extend_from_slice(&(1u32 << 30).to_le_bytes());
                b.extend_from_slice(&[1, 2, 3]);
                (KIND_BATCH, b)
            }
            // A batch cut inside a length.
            _ => (KIND_BATCH, vec![0xff, 0xff]),
        }
    }

    pub(super) fn truncated(&mut self, until: Instant) {
        for _ in 0..16 {
            if Instant::now() >= until {
                return;
            }
            let Some(s) = self.own(Mode::Truncated, until) else {
                return;
            };
            let ours = self.server_key_of(s);
            // A few on wrong keys, then one on ours (the server closes
            // us for it: a new connection for the next).
            for _ in 0..4 {
                let (kind, f) = self.lie();
                let key = self.key();
                let Attacker { main, tally, .. } = self;
                if let Some(p) = main.as_mut() {
                    p.send_own(s, tag(key, kind), f, tally);
                }
            }
            let (kind, f) = self.lie();
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            p.send_own(s, tag(ours, kind), f, tally);
            let wait = until.min(Instant::now() + Duration::from_millis(300));
            p.wait_for(wait, tally, |p| p.state(s) != Some(EpState::Up));
        }
    }

    pub(super) fn big(&mut self) -> *const u8 {
        if self.big.is_empty() {
            // A block of random bytes repeated (cheap to make), then a
            // sound `Write` header of the wire's largest payload first:
            // the first MAX_FRAME_LEN bytes are a plausible frame.
            let block = self.bytes(4096);
            let mut b = vec![0u8; BIG];
            for chunk in b.chunks_mut(block.len()) {
                chunk.copy_from_slice(&block[..chunk.len()]);
            }
            let msg = IoMsg {
                session: self.rng.next_u64(),
                epoch: 1,
                sn: 0,
                ack: 0,
                validate: false,
                stream: false,
                body: Body::Write { data: &[] },
            };
            let _ = msg.emit_with_payload(&mut b, wire::MAX_DATA_LEN as usize, |_| {});
            self.big = b;
        }
        self.big.as_ptr()
    }

    pub(super) fn oversized(&mut self, until: Instant) {
        let at = self.big();
        // Up to OVERSIZED_CONNS connections at once, one large message in
        // flight on each: a server that sizes its receives by what comes
        // holds them all at once.
        let mut budget: u64 = 1 << 30;
        for round in 0..64 {
            if Instant::now() >= until || budget == 0 {
                return;
            }
            let n = round % OVERSIZED_CONNS;
            let Some(s) = self.own_nth(Mode::Oversized, n, until) else {
                return;
            };
            // 2 MiB to 64 MiB, each power of two about as likely.
            let len = (2usize << 20) << self.rng.below(6);
            let len = len.min(BIG).min(budget as usize);
            budget -= len as u64;
            // Mostly wrong keys (the connection lives on), now and then
            // ours (the server should close it).
            let right = self.rng.below(4) == 0;
            let key = if right {
                self.server_key_of(s)
            } else {
                self.key()
            };
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            p.send_shared(s, tag(key, KIND_FRAME), at, len, tally);
            // At most one message per connection in flight.
            let wait = until.min(Instant::now() + Duration::from_secs(2));
            p.wait_for(wait, tally, |p| {
                p.reqs.iter().filter(|r| r.what == What::Send).count() < OVERSIZED_CONNS
            });
        }
    }

    pub(super) fn stall(&mut self, until: Instant, die: bool) {
        let per_burst = if die { 8 } else { 4 };
        for _ in 0..per_burst {
            if Instant::now() >= until {
                return;
            }
            self.stall_one(until, die);
        }
    }

    /// One worker left in the middle of a message: held for a while
    /// without progress, or (`die`) destroyed abruptly.
    pub(super) fn stall_one(&mut self, until: Instant, die: bool) {
        let mode = if die {
            Mode::DieMidMessage
        } else {
            Mode::StallMidMessage
        };
        if self.stalled.len() >= MAX_STALLED {
            let mut s = self.stalled.remove(0);
            s.peer.teardown(Duration::from_millis(300), &mut self.tally);
        }
        let at = self.big();
        let Ok(mut peer) = Peer::new(self.api, self.protocol) else {
            return;
        };
        // A few connections of this worker, each left halfway through a
        // message of its own.
        let mut slots = Vec::new();
        for _ in 0..STALL_CONNS {
            let key = self.key();
            if let Some(s) = peer.connect(&self.server, mode, key, true, &mut self.tally) {
                slots.push(s);
            }
        }
        let wait = until.min(Instant::now() + Duration::from_secs(2));
        peer.wait_for(wait, &mut self.tally, |p| {
            slots.iter().all(|&s| p.state(s) != Some(EpState::Opening))
        });
        for &s in &slots {
            if peer.state(s) != Some(EpState::Up) {
                continue;
            }
            let server_key = peer.ep(s).map_or(0, |e| e.server_key);
            // Whole frames of the wire's largest size, each on a key of
            // its own (mostly not ours, so the server does not close us
            // for the first), until one is left halfway (the socket is
            // full): it stays so.
            for _ in 0..64 {
                let right = self.rng.below(4) == 0;
                let k = if right { server_key } else { self.key() };
                if peer.send_shared(s, tag(k, KIND_FRAME), at, SERVER_MAX_FRAME, &mut self.tally) {
                    break;
                }
            }
        }
        if die {
            // A moment for the server to take the first fragments, then
            // the end: no close, no progress.
            std::thread::sleep(Duration::from_millis(5 + self.rng.below(50)));
            peer.abrupt = true;
            drop(peer);
        } else {
            let hold = Duration::from_millis(1000 + self.rng.below(3000));
            self.stalled.push(Stalled {
                peer,
                release: Instant::now() + hold,
            });
        }
    }

    pub(super) fn stream_garbage(&mut self, until: Instant) {
        let at = self.big();
        // Two connections send at once, each up to STREAM_MAX; full ones
        // stay open, heartbeating; STREAM_CONNS in a run at most.
        let alive =
            |a: &Attacker, s: usize| a.main.as_ref().and_then(|p| p.state(s)) == Some(EpState::Up);
        let mut sending: Vec<usize> = self
            .streams
            .iter()
            .filter(|&&(s, sent)| sent < STREAM_MAX && alive(self, s))
            .map(|&(s, _)| s)
            .collect();
        while sending.len() < 2 && self.streams.len() < STREAM_CONNS {
            let Some(s) = self.own_nth(Mode::StreamGarbage, self.streams.len(), until) else {
                break;
            };
            if let Some(ep) = self
                .main
                .as_mut()
                .and_then(|p| p.eps.get_mut(s))
                .and_then(Option::as_mut)
            {
                ep.beat = true;
            }
            self.streams.push((s, 0));
            sending.push(s);
        }
        let Attacker {
            main,
            tally,
            streams,
            ..
        } = self;
        let Some(p) = main.as_mut() else { return };
        for _ in 0..128 {
            if Instant::now() >= until || sending.is_empty() {
                return;
            }
            for &s in &sending {
                let Some(entry) = streams.iter_mut().find(|e| e.0 == s) else {
                    continue;
                };
                let chunk = 1 << 20;
                p.stream_send_shared(s, at.wrapping_add(HEADER_LEN), chunk, tally);
                entry.1 += chunk as u64;
            }
            // At most 8 MiB in flight per connection.
            let wait = until.min(Instant::now() + Duration::from_secs(1));
            let most = 8 * sending.len();
            p.wait_for(wait, tally, |p| p.reqs.len() < most);
            sending.retain(|&s| {
                p.state(s) == Some(EpState::Up)
                    && streams.iter().any(|e| e.0 == s && e.1 < STREAM_MAX)
            });
        }
    }

    pub(super) fn bad_key_exchange(&mut self, until: Instant) {
        for _ in 0..8 {
            if Instant::now() >= until {
                return;
            }
            let key = self.key();
            let what: Vec<u8> = match self.rng.below(4) {
                0 => key_message(0, self.api).to_vec(),
                1 => vec![1, 2, 3],
                2 => {
                    let mut m = key_message(key, self.api).to_vec();
                    m.extend_from_slice(&[0xee; 24]);
                    m
                }
                _ => vec![0xff; KEY_EXCHANGE_LEN],
            };
            let server = SockAddr::from(self.addr());
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            let Some(s) = p.connect(&server, Mode::BadKeyExchange, key, false, tally) else {
                continue;
            };
            p.stream_send_own(s, what, tally);
            let wait = until.min(Instant::now() + Duration::from_millis(300));
            p.wait_for(wait, tally, |p| p.state(s) == Some(EpState::Dead));
            p.close(s);
        }
    }

    pub(super) fn connect_close(&mut self, until: Instant) {
        for _ in 0..32 {
            if Instant::now() >= until {
                return;
            }
            let key = self.key();
            let exchange = self.rng.below(2) == 0;
            let after = Duration::from_micros(self.rng.below(20_000));
            let server = SockAddr::from(self.addr());
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            let Some(s) = p.connect(&server, Mode::ConnectClose, key, exchange, tally) else {
                continue;
            };
            if !after.is_zero() {
                p.spin(after, tally);
            }
            p.close(s);
            p.progress(tally);
        }
    }

    pub(super) fn silent_connect(&mut self, until: Instant) {
        let cap = (self.conns / 16).max(4);
        self.silent.retain(|&s| {
            self.main
                .as_ref()
                .and_then(|p| p.state(s))
                .is_some_and(|st| st != EpState::Closing && st != EpState::Dead)
        });
        let server = SockAddr::from(self.addr());
        for _ in 0..cap {
            if self.silent.len() >= cap || Instant::now() >= until {
                break;
            }
            let key = self.key();
            // Half finish the key exchange (and heartbeat), half never
            // send their key.
            let exchange = self.rng.below(2) != 0;
            let Attacker { main, tally, .. } = self;
            let Some(p) = main.as_mut() else { return };
            if let Some(s) = p.connect(&server, Mode::SilentConnect, key, exchange, tally) {
                if let Some(ep) = p.eps[s].as_mut() {
                    ep.beat = exchange;
                }
                self.silent.push(s);
                if !exchange {
                    self.unsent.push(s);
                }
            }
            p.progress(tally);
        }
        // Those that never sent their key send a frame on the server's
        // (which came): a frame of a connection the server still has
        // opening.
        let Attacker {
            main,
            tally,
            unsent,
            rng,
            ..
        } = self;
        let Some(p) = main.as_mut() else { return };
        let wait = until.min(Instant::now() + Duration::from_millis(500));
        p.wait_for(wait, tally, |p| {
            unsent.iter().all(|&s| p.state(s) != Some(EpState::Opening))
        });
        for s in mem::take(unsent) {
            if p.state(s) == Some(EpState::Up) {
                let key = p.ep(s).map_or(0, |e| e.server_key);
                let f = frame(rng.next_u64(), 0, false, Body::Write { data: &[1; 64] });
                p.send_own(s, tag(key, KIND_FRAME), f, tally);
            }
        }
    }

    pub(super) fn flood(&mut self, until: Instant) {
        let n = self.conns;
        let workers = n.div_ceil(FLOOD_PER_WORKER);
        let mut peers = Vec::new();
        for _ in 0..workers {
            match Peer::new(self.api, self.protocol) {
                Ok(p) => peers.push(p),
                Err(_) => break,
            }
        }
        let mut opened = 0;
        let deadline = until;
        'open: for p in &mut peers {
            for _ in 0..FLOOD_PER_WORKER {
                if opened >= n || Instant::now() >= deadline {
                    break 'open;
                }
                let key = self.rng.next_u64() & KEY_MASK | 1;
                if let Some(s) = p.connect(&self.server, Mode::Flood, key, true, &mut self.tally) {
                    if let Some(ep) = p.eps[s].as_mut() {
                        ep.beat = true;
                    }
                }
                opened += 1;
                if opened % 25 == 0 {
                    p.progress(&mut self.tally);
                }
            }
        }
        // Until every exchange ended (or the deadline), then held for a
        // moment, everyone heartbeating.
        let settle = deadline.min(Instant::now() + Duration::from_secs(5));
        for _ in 0..1_000_000u32 {
            let mut opening = 0;
            for p in &mut peers {
                p.progress(&mut self.tally);
                opening += p
                    .eps
                    .iter()
                    .flatten()
                    .filter(|e| e.state == EpState::Opening)
                    .count();
            }
            self.service();
            if opening == 0 || Instant::now() >= settle {
                break;
            }
        }
        let hold = until.min(Instant::now() + Duration::from_millis(500));
        while Instant::now() < hold {
            for p in &mut peers {
                p.progress(&mut self.tally);
            }
            self.service();
        }
        for mut p in peers {
            p.teardown(Duration::from_secs(1), &mut self.tally);
        }
    }

    /// Ends the run: every worker torn down, the report made.
    pub(super) fn finish(mut self) -> Vec<ModeReport> {
        for mut s in mem::take(&mut self.stalled) {
            s.peer.teardown(Duration::from_millis(300), &mut self.tally);
        }
        if let Some(mut p) = self.main.take() {
            p.teardown(Duration::from_secs(1), &mut self.tally);
        }
        mem::take(&mut self.tally)
    }
}
