//! The wire-layout helpers of the hostile peer.
use super::*;

#[test]
fn mode_names_round_trip_and_all_lists_every_mode() {
    for m in Mode::ALL {
        assert_eq!(m.name().parse::<Mode>(), Ok(m));
        assert_eq!(m.to_string(), m.name());
        assert_eq!(Mode::ALL[m.index()], m);
    }
    assert_eq!(Mode::list("all"), Ok(Mode::ALL.to_vec()));
    assert_eq!(
        Mode::list("flood, truncated,flood"),
        Ok(vec![Mode::Flood, Mode::Truncated])
    );
    assert!(Mode::list("flood,nope").is_err());
    assert!(Mode::list("").is_err());
}

#[test]
fn tags_put_the_key_above_the_kind_as_the_transport_does() {
    let t = tag(0xabcd, KIND_BATCH);
    assert_eq!(tag_key(t), 0xabcd);
    assert_eq!(tag_kind(t), KIND_BATCH);
    assert_eq!(t, crate::transport::tag(0xabcd, KIND_BATCH));
    assert_eq!(KEY_MASK, crate::transport::KEY_MASK);
    assert_eq!(KIND_MASK, crate::transport::KIND_MASK);
}

#[test]
fn the_key_answer_reads_a_key_or_a_refusal() {
    for api in [Api::Am, Api::Tag] {
        assert_eq!(key_answer(&key_message(7, api), 8), KeyAnswer::Key(7));
        assert_eq!(key_answer(&key_message(0, api), 8), KeyAnswer::Refused);
        assert_eq!(key_answer(&key_message(7, api), 3), KeyAnswer::Refused);
    }
    assert_eq!(
        key_answer(&((1u64 << 60) | 7).to_le_bytes(), 8),
        KeyAnswer::Refused
    );
    assert_eq!(
        key_answer(&(FULL_MARK | 1024).to_le_bytes(), 8),
        KeyAnswer::TableFull
    );
}

#[test]
fn a_resealed_header_parses_up_to_the_lie() {
    let mut f = hello(5);
    assert!(wire::parse(&f).is_ok());
    f[DATA_LEN_AT..DATA_LEN_AT + 4].copy_from_slice(&1000u32.to_le_bytes());
    reseal(&mut f);
    // The CRC is right again: what fails is the length.
    let e = wire::parse(&f).unwrap_err();
    assert!(!format!("{e:?}").contains("Crc"), "{e:?}");
}
