//! A hostile peer: raw UCX traffic aimed at an iomsg server, for tests and
//! `iomsg soak --faults hostile`.
