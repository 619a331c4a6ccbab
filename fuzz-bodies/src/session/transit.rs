//! Frames in transit between a client and the server: delivered in
//! order or not, on the client's connection or another, with a byte
//! flipped or not.

use super::*;

impl World {
    /// Delivers one of the client's queued frames to the server: on its
    /// connection, or on another one the script names (one of its own, or
    /// any: misrouted).
    pub(super) fn forward_to_server(&mut self, i: usize, c: &mut Cursor<'_>) {
        let b = c.byte();
        let conn = (b & 0x80 != 0).then(|| {
            let x = c.byte();
            if x & 0x80 == 0 {
                Self::own_conn(i, x)
            } else {
                ConnId::new(u32::from((x & 0x7f) % ANY_CONN_IDS + 1), 0)
            }
        });
        let q = &mut self.peers[i].outbox;
        if q.is_empty() {
            return;
        }
        // Mostly the oldest (in order), sometimes another (reordering).
        let k = if b & 0x40 == 0 {
            0
        } else {
            usize::from(b & 0x3f) % q.len()
        };
        let Some(frame) = q.remove(k) else { return };
        let flip = Flip::read(c, frame.len());
        self.send_to_server(i, conn, frame, flip);
    }

    pub(super) fn send_to_server(
        &mut self,
        i: usize,
        conn: Option<ConnId>,
        mut frame: Vec<u8>,
        flip: Flip,
    ) {
        let Some(conn) = conn.or(self.peers[i].conn) else {
            return; // Not connected: the frame is lost.
        };
        let checked = wire::parse(&frame).map(|m| m.validate);
        assert!(checked.is_ok(), "the client emitted a malformed frame");
        if self.shared && self.conn_owner(conn) != Some(i) {
            // On a connection of the other client (or of nobody): for the
            // server it is that client's frame, and a frame of the session
            // that neither sent on its own connections.
            self.mark_forged(&frame);
        }
        flip.apply(&mut frame);
        let must_not_deliver = match flip {
            Flip::None => None,
            Flip::Byte { pos, .. } if pos < HEADER_LEN => Some("a header with a flipped byte"),
            Flip::Byte { .. } if checked == Ok(true) => {
                Some("a checksummed payload with a flipped byte")
            }
            // An unchecked payload is delivered as it came (property 14).
            Flip::Byte { .. } => None,
        };
        let intact = flip == Flip::None;
        self.server_frame(conn, &frame, Some(i), intact, must_not_deliver);
    }

    /// Delivers one of the server's queued frames to the client.
    pub(super) fn forward_to_client(&mut self, i: usize, c: &mut Cursor<'_>) {
        let b = c.byte();
        let q = &mut self.peers[i].inbox;
        if q.is_empty() {
            return;
        }
        let k = if b & 0x40 == 0 {
            0
        } else {
            usize::from(b & 0x3f) % q.len()
        };
        let Some(mut frame) = q.remove(k) else { return };
        let flip = Flip::read(c, frame.len());
        flip.apply(&mut frame);
        self.peers[i].tainted |= flip != Flip::None;
        let before = *self.peers[i].client.stats();
        self.client_frame(i, &frame);
        if matches!(flip, Flip::Byte { pos, .. } if pos < HEADER_LEN) {
            self.assert_window_unmoved(i, &before, "a server frame with a flipped header byte");
        }
    }
}
