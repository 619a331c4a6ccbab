//! The hostile peer's UCP side: its own context and worker, endpoints
//! opened to the server, raw sends on the stream and tag APIs, and their
//! teardown.

use super::*;

impl Peer {
    pub(super) fn new(api: Api, protocol: Protocol) -> Result<Peer, String> {
        let settings = crate::UcxConfig::default().settings;
        let settings: Vec<(&str, &str)> = settings
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        // Both APIs whatever the server's: the active-message modes send
        // to tag servers too.
        let features = u64::from(sys::UCP_FEATURE_STREAM)
            | u64::from(sys::UCP_FEATURE_TAG)
            | u64::from(sys::UCP_FEATURE_AM);
        let worker = Worker::with_features(WaitMode::BusyPoll, &settings, 1024, features)
            .and_then(|w| w.take_ams().map(|()| w))
            .map_err(|s| format!("creating a UCX context and worker: {s}"))?;
        Ok(Peer {
            worker,
            api,
            protocol,
            eps: Vec::new(),
            reqs: Vec::new(),
            by_key: BTreeMap::new(),
            abrupt: false,
            orphans: Vec::new(),
            torn_down: false,
        })
    }

    pub(super) fn ep(&self, i: usize) -> Option<&Ep> {
        self.eps.get(i).and_then(Option::as_ref)
    }

    pub(super) fn state(&self, i: usize) -> Option<EpState> {
        self.ep(i).map(|e| e.state)
    }

    /// Opens a connection to `server` for `mode`; with `exchange`, starts
    /// the key exchange at once (our key out, theirs in).
    pub(super) fn connect(
        &mut self,
        server: &SockAddr,
        mode: Mode,
        our_key: u64,
        exchange: bool,
        t: &mut Tally,
    ) -> Option<usize> {
        let slot = self
            .eps
            .iter()
            .position(Option::is_none)
            .unwrap_or_else(|| {
                self.eps.push(None);
                self.eps.len() - 1
            });
        let err = Box::new(ErrArg {
            shared: self.worker.shared_ptr(),
            key: slot as _,
        });
        let p = crate::transport::dial_mode(&err, server.as_ucs());
        let mut h: sys::ucp_ep_h = ptr::null_mut();
        t[mode.index()].opened += 1;
        // SAFETY: the worker is live; the socket address lives in the
        // caller for the call; `err` is boxed in the endpoint's slot and
        // outlives the endpoint (freed once its close completed, or after
        // the worker is destroyed).
        let made = Status(unsafe { sys::ucp_ep_create(self.worker.worker, &p, &mut h) });
        if made.check().is_err() {
            t[mode.index()].refused += 1;
            return None;
        }
        self.eps[slot] = Some(Ep {
            h,
            _err: err,
            mode,
            state: EpState::Opening,
            server_key: 0,
            our_key,
            beat: false,
            last_beat: Instant::now(),
        });
        self.by_key.insert(our_key, slot);
        if exchange {
            let hello = self.protocol.hello(our_key, self.api);
            if !hello.is_empty() {
                self.stream_send_own(slot, hello, t);
            }
        }
        if self.protocol.answer_len(self.api) == 0 {
            // io_demo's `-A` clients exchange nothing: up at once.
            self.key_answered(slot, KeyAnswer::Key(0), t);
        } else {
            self.key_recv(slot, t);
        }
        Some(slot)
    }

    /// Starts receiving the server's key on the stream of `slot`.
    pub(super) fn key_recv(&mut self, slot: usize, t: &mut Tally) {
        let Some(ep) = self.ep(slot) else { return };
        let (h, mode) = (ep.h, ep.mode);
        let mut buf = Box::new([0u8; KEY_EXCHANGE_LEN]);
        let want = self.protocol.answer_len(self.api).min(KEY_EXCHANGE_LEN);
        let p = params(sys::UCP_STREAM_RECV_FLAG_WAITALL);
        let mut length = 0usize;
        // SAFETY: the endpoint is live; the 8-byte buffer (`want` <= 8
        // bytes used) is boxed in the request kept below until it
        // completed or the worker is gone; `length` is written only on
        // immediate completion.
        let ptr =
            unsafe { sys::ucp_stream_recv_nbx(h, buf.as_mut_ptr().cast(), want, &mut length, &p) };
        match Pending::from_ptr(ptr) {
            Pending::Request(r) => self.reqs.push(Req {
                h: r,
                ep: slot,
                mode,
                what: What::KeyRecv,
                buf: ReqBuf::Key(buf),
                tag: 0,
            }),
            Pending::Done => {
                let answer = self.protocol.answer(&buf, length);
                self.key_answered(slot, answer, t);
            }
            Pending::Failed(_) => self.key_answered(slot, KeyAnswer::Refused, t),
        }
    }

    pub(super) fn key_answered(&mut self, slot: usize, answer: KeyAnswer, t: &mut Tally) {
        let Some(ep) = self.eps.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if ep.state != EpState::Opening {
            return;
        }
        let r = &mut t[ep.mode.index()];
        match answer {
            KeyAnswer::Key(k) => {
                ep.server_key = k;
                ep.state = EpState::Up;
                r.established += 1;
            }
            KeyAnswer::TableFull => {
                ep.state = EpState::Dead;
                r.refused += 1;
                r.table_full += 1;
            }
            KeyAnswer::Refused => {
                ep.state = EpState::Dead;
                r.refused += 1;
            }
        }
    }

    /// Sends `bytes` on the stream of `slot`.
    pub(super) fn stream_send_own(&mut self, slot: usize, bytes: Vec<u8>, t: &mut Tally) {
        let Some(ep) = self.ep(slot) else { return };
        let (h, mode) = (ep.h, ep.mode);
        let len = bytes.len();
        let p = params(0);
        // SAFETY: the endpoint is live; the bytes move into the request
        // kept below until it completed or the worker is gone.
        let ptr = unsafe { sys::ucp_stream_send_nbx(h, bytes.as_ptr().cast(), len, &p) };
        t[mode.index()].bytes += len as u64;
        self.track(ptr, slot, mode, What::KeySend, ReqBuf::Own(bytes), t);
    }

    /// Sends `len` bytes of the shared buffer at `at` on the stream.
    pub(super) fn stream_send_shared(
        &mut self,
        slot: usize,
        at: *const u8,
        len: usize,
        t: &mut Tally,
    ) {
        let Some(ep) = self.ep(slot) else { return };
        let (h, mode) = (ep.h, ep.mode);
        let p = params(0);
        // SAFETY: the endpoint is live; `at` points to `len` bytes of the
        // run's shared buffer, which outlives every worker (see
        // `Attacker`).
        let ptr = unsafe { sys::ucp_stream_send_nbx(h, at.cast(), len, &p) };
        t[mode.index()].bytes += len as u64;
        self.track(ptr, slot, mode, What::Send, ReqBuf::Shared, t);
    }

    /// Sends a message of `bytes` on the endpoint of `slot`: tagged
    /// `tag`, or an active message whose header is `tag`.
    pub(super) fn send_own(&mut self, slot: usize, tag: u64, bytes: Vec<u8>, t: &mut Tally) {
        let Some(ep) = self.ep(slot) else { return };
        let (h, mode) = (ep.h, ep.mode);
        let len = bytes.len();
        let p = params(0);
        let ptr = match self.api {
            // SAFETY: the endpoint is live; the bytes move into the
            // request kept below until it completed or the worker is gone
            // (a Vec's heap buffer does not move with it).
            Api::Tag => unsafe { sys::ucp_tag_send_nbx(h, bytes.as_ptr().cast(), len, tag, &p) },
            Api::Am => {
                // The header first, then the bytes, in one buffer kept
                // with the request (UCX may read the header until then).
                let mut own = tag.to_le_bytes().to_vec();
                own.extend_from_slice(&bytes);
                let at = own.as_ptr();
                let p = params(self.protocol.am_flags());
                // SAFETY: as above; `own` holds the 8-byte header and then
                // `len` bytes, and moves into the request kept below.
                let ptr = unsafe {
                    sys::ucp_am_send_nbx(h, AM_ID, at.cast(), 8, at.add(8).cast(), len, &p)
                };
                t[mode.index()].messages += 1;
                t[mode.index()].bytes += len as u64;
                self.track(ptr, slot, mode, What::Send, ReqBuf::Own(own), t);
                return;
            }
        };
        t[mode.index()].messages += 1;
        t[mode.index()].bytes += len as u64;
        self.track(ptr, slot, mode, What::Send, ReqBuf::Own(bytes), t);
    }

    /// Sends a tagged message of `len` bytes of the shared buffer at `at`.
    /// Returns whether it is still in progress.
    pub(super) fn send_shared(
        &mut self,
        slot: usize,
        tag: u64,
        at: *const u8,
        len: usize,
        t: &mut Tally,
    ) -> bool {
        let Some(ep) = self.ep(slot) else {
            return false;
        };
        let (h, mode) = (ep.h, ep.mode);
        let p = params(0);
        let (ptr, buf) = match self.api {
            // SAFETY: the endpoint is live; `at` points to `len` bytes of
            // the run's shared buffer, which outlives every worker.
            Api::Tag => (
                unsafe { sys::ucp_tag_send_nbx(h, at.cast(), len, tag, &p) },
                ReqBuf::Shared,
            ),
            Api::Am => {
                let header = tag.to_le_bytes().to_vec();
                // SAFETY: as above; the header moves into the request
                // kept below (UCX may read it until it completes).
                let ptr = unsafe {
                    sys::ucp_am_send_nbx(h, AM_ID, header.as_ptr().cast(), 8, at.cast(), len, &p)
                };
                (ptr, ReqBuf::Own(header))
            }
        };
        t[mode.index()].messages += 1;
        t[mode.index()].bytes += len as u64;
        self.track(ptr, slot, mode, What::Send, buf, t)
    }

    /// Sends an active message on id `id` of the endpoint of `slot`:
    /// `header` and then `data` (owned, or `len` bytes of the run's shared
    /// buffer at `shared`), with `flags` (`UCP_AM_SEND_FLAG_*`). Returns
    /// whether it is still in progress.
    pub(super) fn send_am(&mut self, slot: usize, id: u32, am: AmOut, t: &mut Tally) -> bool {
        let Some(ep) = self.ep(slot) else {
            return false;
        };
        let (h, mode) = (ep.h, ep.mode);
        let AmOut {
            header,
            data,
            flags,
        } = am;
        // The header first, then owned bytes, in one buffer kept with the
        // request (UCX may read the header until it completes).
        let hn = header.len();
        let mut own = header;
        let (at, len) = match data {
            AmBytes::Own(bytes) => {
                own.extend_from_slice(&bytes);
                (None, bytes.len())
            }
            AmBytes::Shared { at, len } => (Some(at), len),
        };
        let base = own.as_ptr();
        // SAFETY: pointers into `own` (which moves into the request below,
        // its heap buffer with it) or into the run's shared buffer, which
        // outlives every worker.
        let data_at = at.unwrap_or_else(|| unsafe { base.add(hn) });
        let p = params(flags);
        // SAFETY: the endpoint is live; the header is `hn` bytes at the
        // start of `own`, the data `len` bytes at `data_at`, both alive
        // until the request completed or the worker is gone.
        let ptr = unsafe { sys::ucp_am_send_nbx(h, id, base.cast(), hn, data_at.cast(), len, &p) };
        t[mode.index()].messages += 1;
        t[mode.index()].bytes += (hn + len) as u64;
        self.track(ptr, slot, mode, What::Send, ReqBuf::Own(own), t)
    }

    /// Sends a tagged message whatever the attack's API (the `am-*`
    /// modes try the other API too). Returns whether it is in progress.
    pub(super) fn send_tagged(
        &mut self,
        slot: usize,
        tag: u64,
        data: AmBytes,
        t: &mut Tally,
    ) -> bool {
        let Some(ep) = self.ep(slot) else {
            return false;
        };
        let (h, mode) = (ep.h, ep.mode);
        let (own, at, len) = match data {
            AmBytes::Own(bytes) => {
                let (at, len) = (bytes.as_ptr(), bytes.len());
                (ReqBuf::Own(bytes), at, len)
            }
            AmBytes::Shared { at, len } => (ReqBuf::Shared, at, len),
        };
        let p = params(0);
        // SAFETY: the endpoint is live; `len` bytes at `at` are in `own`
        // (moved into the request below, its heap buffer with it) or in
        // the run's shared buffer, which outlives every worker.
        let ptr = unsafe { sys::ucp_tag_send_nbx(h, at.cast(), len, tag, &p) };
        t[mode.index()].messages += 1;
        t[mode.index()].bytes += len as u64;
        self.track(ptr, slot, mode, What::Send, own, t)
    }

    /// Keeps a request, or counts its immediate result. Returns whether
    /// it is in progress.
    pub(super) fn track(
        &mut self,
        ptr: sys::ucs_status_ptr_t,
        ep: usize,
        mode: Mode,
        what: What,
        buf: ReqBuf,
        t: &mut Tally,
    ) -> bool {
        match Pending::from_ptr(ptr) {
            Pending::Request(h) => {
                self.reqs.push(Req {
                    h,
                    ep,
                    mode,
                    what,
                    buf,
                    tag: 0,
                });
                true
            }
            Pending::Done => false,
            Pending::Failed(_) => {
                t[mode.index()].send_errors += 1;
                false
            }
        }
    }

    /// Closes the endpoint of `slot` (force): it goes once closed.
    pub(super) fn close(&mut self, slot: usize) {
        let Some(ep) = self.eps.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if ep.state == EpState::Closing {
            return;
        }
        ep.state = EpState::Closing;
        let (h, mode) = (ep.h, ep.mode);
        let p = params(sys::UCP_EP_CLOSE_FLAG_FORCE);
        // SAFETY: the endpoint is live and closed once (its state is now
        // Closing); FORCE releases it without waiting for the server.
        let ptr = unsafe { sys::ucp_ep_close_nbx(h, &p) };
        match Pending::from_ptr(ptr) {
            Pending::Request(r) => self.reqs.push(Req {
                h: r,
                ep: slot,
                mode,
                what: What::Close,
                buf: ReqBuf::None,
                tag: 0,
            }),
            Pending::Done | Pending::Failed(_) => self.forget(slot),
        }
    }

    /// The endpoint of `slot` is closed: its slot and argument go.
    pub(super) fn forget(&mut self, slot: usize) {
        if let Some(ep) = self.eps.get_mut(slot).and_then(Option::take) {
            self.by_key.remove(&ep.our_key);
        }
    }

    /// Progresses the worker a few times and handles what completed,
    /// failed or arrived.
    pub(super) fn progress(&mut self, t: &mut Tally) {
        for _ in 0..4 {
            if !self.worker.progress() {
                break;
            }
        }
        let failed = self.worker.shared.failed.take();
        for (slot, _status) in failed {
            let slot = slot as usize;
            if let Some(ep) = self.eps.get_mut(slot).and_then(Option::as_mut) {
                match ep.state {
                    EpState::Up => t[ep.mode.index()].closed_by_server += 1,
                    EpState::Opening => t[ep.mode.index()].refused += 1,
                    EpState::Dead | EpState::Closing => {}
                }
                if ep.state != EpState::Closing {
                    ep.state = EpState::Dead;
                }
            }
        }
        self.complete(t);
        self.probe(t);
        self.heartbeats(t);
    }

    /// Handles the requests that completed.
    pub(super) fn complete(&mut self, t: &mut Tally) {
        let mut i = 0;
        while i < self.reqs.len() {
            let h = self.reqs[i].h;
            // SAFETY: h is a live request of this worker, not yet freed.
            let status = Status(unsafe { sys::ucp_request_check_status(h) });
            if status == Status::IN_PROGRESS {
                i += 1;
                continue;
            }
            let mut length = 0usize;
            if self.reqs[i].what == What::KeyRecv {
                // SAFETY: a completed stream receive of this worker, not
                // yet freed; length is a local out-pointer.
                let _ = unsafe { sys::ucp_stream_recv_request_test(h, &mut length) };
            }
            self.worker.free(h);
            let r = self.reqs.swap_remove(i);
            match r.what {
                What::KeySend | What::Send => {
                    if !status.is_ok() {
                        t[r.mode.index()].send_errors += 1;
                    }
                }
                What::KeyRecv => {
                    let answer = match (&r.buf, status.is_ok()) {
                        (ReqBuf::Key(b), true) => self.protocol.answer(b, length),
                        _ => KeyAnswer::Refused,
                    };
                    self.key_answered(r.ep, answer, t);
                }
                What::Recv => {
                    if let (ReqBuf::Own(b), true) = (&r.buf, status.is_ok()) {
                        self.answered(r.tag, b, t);
                    }
                }
                What::Close => self.forget(r.ep),
            }
        }
    }

    /// Receives what the server sent us (its answers, heartbeats).
    pub(super) fn probe(&mut self, t: &mut Tally) {
        self.arrived(t);
        for _ in 0..256 {
            // SAFETY: all-zero is a valid info value to fill.
            let mut info: sys::ucp_tag_recv_info_t = unsafe { mem::zeroed() };
            // SAFETY: the worker is live; tag and mask 0 match any tag;
            // remove=1 takes the message for ucp_tag_msg_recv_nbx below.
            let msg = unsafe { sys::ucp_tag_probe_nb(self.worker.worker, 0, 0, 1, &mut info) };
            if msg.is_null() {
                return;
            }
            // A server sends frames of at most its largest frame; more is
            // still received (UCX holds it otherwise), never kept.
            let mut buf = vec![0u8; info.length];
            let p = params(0);
            // SAFETY: msg came from the probe above and is consumed once;
            // buf has `info.length` bytes and moves into the request kept
            // until it completed or the worker is gone.
            let ptr = unsafe {
                sys::ucp_tag_msg_recv_nbx(
                    self.worker.worker,
                    buf.as_mut_ptr().cast(),
                    info.length,
                    msg,
                    &p,
                )
            };
            let ep = self
                .by_key
                .get(&tag_key(info.sender_tag))
                .copied()
                .unwrap_or(usize::MAX);
            let mode = self.ep(ep).map_or(Mode::RandomTags, |e| e.mode);
            match Pending::from_ptr(ptr) {
                Pending::Request(h) => self.reqs.push(Req {
                    h,
                    ep,
                    mode,
                    what: What::Recv,
                    buf: ReqBuf::Own(buf),
                    tag: info.sender_tag,
                }),
                Pending::Done => self.answered(info.sender_tag, &buf, t),
                Pending::Failed(_) => {}
            }
        }
    }

    /// Counts the active messages the server sent and gives them back to
    /// UCX (a rendezvous is declined, never fetched).
    fn arrived(&mut self, t: &mut Tally) {
        for a in self.worker.shared.arrivals.take() {
            let tag = a.header.unwrap_or(u64::MAX);
            match a.data {
                AmData::Held { data, len } => {
                    let bytes = if data.is_null() || len == 0 {
                        &[][..]
                    } else {
                        // SAFETY: UCX keeps a held message's `len` bytes
                        // at `data` until it is released, just below.
                        unsafe { core::slice::from_raw_parts(data.cast::<u8>(), len) }
                    };
                    self.answered(tag, bytes, t);
                    // SAFETY: a held message of this worker, released once.
                    unsafe { sys::ucp_am_data_release(self.worker.worker, data) };
                }
                AmData::Rndv { desc, .. } => {
                    self.answered(tag, &[], t);
                    // SAFETY: a rendezvous descriptor of this worker, not
                    // received; released once.
                    unsafe { sys::ucp_am_data_release(self.worker.worker, desc) };
                }
                AmData::Copied(bytes) => self.answered(tag, &bytes, t),
            }
        }
    }

    /// Counts a message the server sent.
    pub(super) fn answered(&mut self, tag: u64, bytes: &[u8], t: &mut Tally) {
        let Some(mode) = self
            .by_key
            .get(&tag_key(tag))
            .and_then(|&s| self.ep(s))
            .map(|e| e.mode)
        else {
            return;
        };
        let r = &mut t[mode.index()];
        let mut count = |f: &[u8]| {
            r.frames_back += 1;
            if let Ok(IoMsg {
                body: Body::Reject { reason, .. },
                ..
            }) = wire::parse(f)
            {
                *r.rejects.entry(reason.name().to_string()).or_default() += 1;
            }
        };
        match tag_kind(tag) {
            KIND_HEARTBEAT => r.heartbeats_back += 1,
            KIND_BATCH => {
                let mut at = 0usize;
                for _ in 0..4096 {
                    if at + 4 > bytes.len() {
                        break;
                    }
                    let mut n = [0u8; 4];
                    n.copy_from_slice(&bytes[at..at + 4]);
                    let end = (at + 4).saturating_add(u32::from_le_bytes(n) as usize);
                    count(&bytes[at + 4..end.min(bytes.len())]);
                    at = end;
                }
            }
            _ => count(bytes),
        }
    }

    /// Heartbeats on the connections that keep themselves alive.
    pub(super) fn heartbeats(&mut self, t: &mut Tally) {
        let now = Instant::now();
        let due: Vec<(usize, u64)> = self
            .eps
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
            .filter(|(_, e)| {
                e.beat
                    && e.state == EpState::Up
                    && now.duration_since(e.last_beat) >= Duration::from_millis(200)
            })
            .map(|(i, e)| (i, e.server_key))
            .collect();
        for (slot, key) in due {
            if let Some(ep) = self.eps[slot].as_mut() {
                ep.last_beat = now;
            }
            self.send_own(slot, tag(key, KIND_HEARTBEAT), Vec::new(), t);
        }
    }

    /// Progresses until `done` says so or `until`; returns whether done.
    pub(super) fn wait_for(
        &mut self,
        until: Instant,
        t: &mut Tally,
        mut done: impl FnMut(&Peer) -> bool,
    ) -> bool {
        for _ in 0..10_000_000u32 {
            self.progress(t);
            if done(self) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
        }
        false
    }

    /// Progresses for `d` (bounded).
    pub(super) fn spin(&mut self, d: Duration, t: &mut Tally) {
        let until = Instant::now() + d;
        self.wait_for(until, t, |_| false);
    }

    /// Closes every endpoint and lets the requests complete, within
    /// `limit`; what UCX never completes stays for the worker's
    /// destruction (their buffers are freed after it).
    pub(super) fn teardown(&mut self, limit: Duration, t: &mut Tally) {
        if self.torn_down {
            return;
        }
        self.torn_down = true;
        let slots: Vec<usize> = (0..self.eps.len()).collect();
        for s in slots {
            self.close(s);
        }
        if !self.abrupt {
            let until = Instant::now() + limit;
            self.wait_for(until, t, |p| p.reqs.is_empty());
            for r in &self.reqs {
                // SAFETY: a live request of this worker; cancelling
                // completes it (UCS_ERR_CANCELED) on a later progress if
                // UCX can.
                unsafe { sys::ucp_request_cancel(self.worker.worker, r.h) };
            }
            let until = Instant::now() + limit / 2;
            self.wait_for(until, t, |p| p.reqs.is_empty());
        }
        // Active messages that came meanwhile go back to UCX.
        self.arrived(t);
        // What is left is released by UCX when it completes (at the
        // latest while the worker is destroyed); its memory stays until
        // the worker is gone.
        for r in mem::take(&mut self.reqs) {
            // SAFETY: a live request of this worker, freed once (it leaves
            // `reqs`); UCX releases an unfinished one when it completes,
            // and its buffer stays in `orphans` until the worker is gone.
            unsafe { sys::ucp_request_free(r.h) };
            self.orphans.push(r.buf);
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let mut scratch: Tally = vec![ModeReport::default(); Mode::ALL.len()];
        self.teardown(Duration::from_millis(500), &mut scratch);
        // The worker is destroyed by its own Drop (the first field); then
        // `orphans` and `eps` free the buffers and handler arguments UCX
        // can no longer touch.
    }
}
