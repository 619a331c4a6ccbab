//! The network's endpoints as the core's transports: [`ClientPort`]
//! (a connector) and [`ServerPort`] (a listener), and the tokens that lend
//! their buffers.

use iomsg_core::transport::{
    Capabilities, ConnId, Connector, DisconnectReason, Event, Listener, RxToken, SendError,
    Transport, TxToken,
};
use iomsg_core::wire::MAX_FRAME_LEN;
use iomsg_core::Instant;

use super::*;

/// A client endpoint: connects to one server address.
pub struct ClientPort {
    pub(super) net: Network,
    pub(super) ep: EpId,
    pub(super) uid: EndpointId,
    pub(super) server: Addr,
}

/// A server endpoint: accepts connections on its address until it crashes
/// or is dropped.
pub struct ServerPort {
    pub(super) net: Network,
    pub(super) ep: EpId,
    pub(super) uid: EndpointId,
    pub(super) addr: Addr,
}

impl ServerPort {
    /// The address it listens on.
    pub fn addr(&self) -> Addr {
        self.addr
    }
    /// Its network-wide identity (as a [`Tap`] names it).
    pub fn endpoint(&self) -> EndpointId {
        self.uid
    }
}

impl ClientPort {
    /// The server address it connects to.
    pub fn server(&self) -> Addr {
        self.server
    }
    /// Its network-wide identity (as a [`Tap`] names it).
    pub fn endpoint(&self) -> EndpointId {
        self.uid
    }
}

impl Drop for ClientPort {
    /// The client process (or its transport) is gone: its connections reset,
    /// and whatever still arrives for it goes to a dead endpoint.
    fn drop(&mut self) {
        self.net.inner.borrow_mut().crash(self.ep, self.uid);
    }
}

impl Drop for ServerPort {
    /// The server process is gone: its connections reset, the address is free.
    fn drop(&mut self) {
        self.net.inner.borrow_mut().crash(self.ep, self.uid);
    }
}

impl Network {
    /// Runs `f` on the network with its clock moved on to `now`.
    #[inline]
    pub(super) fn at<R>(&self, now: Instant, f: impl FnOnce(&mut Inner) -> R) -> R {
        let mut inner = self.inner.borrow_mut();
        inner.advance(now);
        f(&mut inner)
    }
}

/// A loopback transmit buffer: the frame goes onto the network when the
/// driver has written it.
pub struct LoopTx<'a> {
    net: &'a Network,
    uid: EndpointId,
    conn: ConnId,
    buf: Vec<u8>,
}

impl TxToken for LoopTx<'_> {
    fn consume<R>(mut self, emit: impl FnOnce(&mut [u8]) -> R) -> R {
        let r = emit(&mut self.buf);
        let mut inner = self.net.inner.borrow_mut();
        // Checked when the buffer was lent; nothing ran in between.
        let _ = inner.send(self.uid, self.conn, core::mem::take(&mut self.buf));
        r
    }
}

/// A received loopback frame; its buffer goes back to the network's pool.
pub struct LoopRx<'a> {
    net: &'a Network,
    frame: Vec<u8>,
}

impl RxToken for LoopRx<'_> {
    fn consume<R>(self, read: impl FnOnce(&[u8]) -> R) -> R {
        read(&self.frame)
    }
}

impl Drop for LoopRx<'_> {
    fn drop(&mut self) {
        let frame = core::mem::take(&mut self.frame);
        self.net.inner.borrow_mut().recycle(Kind::Frame(frame));
    }
}

impl Network {
    fn lend(
        &self,
        now: Instant,
        uid: EndpointId,
        conn: ConnId,
        len: usize,
    ) -> Result<LoopTx<'_>, SendError> {
        if len > MAX_FRAME_LEN {
            return Err(SendError::TooLarge {
                len,
                max: MAX_FRAME_LEN,
            });
        }
        let buf = self.at(now, |n| {
            n.may_send(uid, conn)?;
            let mut b = n.pool.pop().unwrap_or_default();
            b.clear();
            b.resize(len, 0);
            Ok(b)
        })?;
        Ok(LoopTx {
            net: self,
            uid,
            conn,
            buf,
        })
    }

    #[inline]
    fn poll_endpoint(&self, now: Instant, ep: EpId) -> Option<Event<LoopRx<'_>>> {
        self.at(now, |n| {
            n.poll(ep, now, |frame| LoopRx { net: self, frame })
        })
    }
}

/// What the loopback network carries: any frame the wire allows, in order
/// per connection (its faults break that on purpose).
const CAPABILITIES: Capabilities = Capabilities {
    max_frame: MAX_FRAME_LEN,
    in_order: true,
};

/// The loopback `Transport` of a port type: both kinds are endpoints of
/// the same network and differ only in their role.
macro_rules! port_transport {
    ($port:ty) => {
        impl Transport for $port {
            type TxToken<'a> = LoopTx<'a>;
            type RxToken<'a> = LoopRx<'a>;
            fn capabilities(&self) -> Capabilities {
                CAPABILITIES
            }
            fn transmit(
                &mut self,
                now: Instant,
                conn: ConnId,
                len: usize,
            ) -> Result<LoopTx<'_>, SendError> {
                self.net.lend(now, self.uid, conn, len)
            }
            fn close(&mut self, now: Instant, conn: ConnId) {
                self.net.at(now, |n| n.close(self.uid, conn));
            }
            fn poll(&mut self, now: Instant) -> Option<Event<LoopRx<'_>>> {
                self.net.poll_endpoint(now, self.ep)
            }
        }

        impl $port {
            /// Sends a frame built elsewhere (a copy into a lent buffer):
            /// for peers that speak raw frames, such as the simulation's
            /// stray peer.
            ///
            /// # Errors
            ///
            /// As [`Transport::transmit`].
            pub fn send_frame(
                &mut self,
                now: Instant,
                conn: ConnId,
                frame: &[u8],
            ) -> Result<(), SendError> {
                let token = self.transmit(now, conn, frame.len())?;
                token.consume(|buf| buf.copy_from_slice(frame));
                Ok(())
            }
        }
    };
}

port_transport!(ClientPort);
port_transport!(ServerPort);

impl Connector for ClientPort {
    fn connect(&mut self, now: Instant) -> Result<ConnId, DisconnectReason> {
        Ok(self
            .net
            .at(now, |n| n.connect(self.ep, self.uid, self.server)))
    }
}

impl Listener for ServerPort {}
