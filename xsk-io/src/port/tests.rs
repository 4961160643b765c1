#[test]
fn the_fill_ring_waits_for_a_batch_but_never_below_an_rx_ring() {
    use super::rx::{skip_refill, REFILL_BATCH};
    // The stack's sizing: fill twice the RX ring.
    assert!(skip_refill(8192, 8192, 4096));
    assert!(skip_refill(8192 - REFILL_BATCH + 1, 8192, 4096));
    assert!(!skip_refill(8192 - REFILL_BATCH, 8192, 4096));
    assert!(!skip_refill(0, 8192, 4096));
    // Fill and RX the same size: only a full ring waits, as before.
    assert!(skip_refill(2048, 2048, 2048));
    assert!(!skip_refill(2047, 2048, 2048));
    // A ring smaller than a batch waits down to an RX ring's worth; a count past
    // the size does not wrap.
    assert!(skip_refill(15, 16, 8));
    assert!(!skip_refill(7, 16, 8));
    assert!(skip_refill(9000, 8192, 4096));
}

#[test]
fn a_port_can_move_to_its_thread() {
    fn is_send<T: Send>() {}
    is_send::<super::Port>();
}
