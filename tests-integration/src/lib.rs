//! Multi-process tests of iomsg over real UCX (`tests/`), and
//! `iomsg-ucx-peer` (`src/bin/`), one end of a session that they start as
//! a separate process. Never published: fixtures, not a library.
