//! placeholder
#[derive(clap::Args, Debug, Clone)]
pub struct MatrixArgs {
    #[command(flatten)]
    pub common: crate::env::Common,
}
pub fn run(_a: &MatrixArgs) -> anyhow::Result<bool> { anyhow::bail!("not yet") }
