//! The network provider's receive path, fed by a hostile peer.

use crate::draw::Tape;
use crate::transport::fabric::hostile;

/// One round of the fabric receive path over messages the input chooses
/// (`transport::fabric::hostile::case` says what must hold).
pub fn fabric_messages(data: &[u8]) {
    hostile::case(&mut Tape::new(data));
}
