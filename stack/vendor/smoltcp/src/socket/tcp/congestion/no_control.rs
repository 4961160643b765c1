use super::Controller;

// [xsk-stack patch: eifel] Clone: kept to undo a congestion response.
#[derive(Debug, Clone)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NoControl;

impl Controller for NoControl {
    fn window(&self) -> usize {
        usize::MAX
    }
}
