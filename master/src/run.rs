//! `run`: a master process from the master lock (standbys wait on it) to its end: serving
//! once it holds the lock, stopping when asked or when its Hyperspace session is lost.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use hyperspace::client::{Hyperspace, SessionState};
use hyperspace::command::{LockMode, flags};
use proto::layout::*;
use tokio::sync::{mpsc, watch};

use crate::balance;
use crate::control::Master;
use crate::{MasterConfig, service};
use crate::{Result, hs_err, unavailable};

/// Runs a master: waits for the master lock (a standby waits here), then serves until `stop`
/// turns true or the Hyperspace session is lost (then it returns an error at once: another
/// master may already hold the lock).
pub async fn run(config: MasterConfig, mut stop: watch::Receiver<bool>) -> Result<()> {
    let (hs, _events) = Hyperspace::connect(
        config.hyperspace.clone(),
        config.credentials.clone(),
        config.hyperspace_options.clone(),
    )
    .await
    .map_err(hs_err)?;
    for dir in [NAMESPACES, TABLES, SERVERS, OPS, RETIRED] {
        hs.mkdirs(dir).await.map_err(hs_err)?;
    }
    // The ROOT location's file, so that setting its attribute never fails.
    let root = hs
        .open(ROOT, flags::READ | flags::WRITE | flags::CREATE, 0)
        .await
        .map_err(hs_err)?;
    hs.close(root).await.map_err(hs_err)?;
    let lock = hs
        .open(
            MASTER,
            flags::READ | flags::WRITE | flags::LOCK | flags::CREATE,
            0,
        )
        .await
        .map_err(hs_err)?;
    let mut state = hs.state_watch();
    tracing::info!("waiting for the master lock");
    tokio::select! {
        r = hs.lock(lock, LockMode::Exclusive) => { r.map_err(hs_err)?; }
        _ = stop.changed() => return Ok(()),
        _ = lost(&mut state) => return Err(unavailable("hyperspace session lost while waiting for the master lock".into())),
    }
    tracing::info!("holding the master lock");
    let (tx, rx) = mpsc::channel(config.request_queue.max(1));
    let server = service::MasterService::new(tx)
        .bind(config.listen, &config.credentials)
        .map_err(|e| unavailable(format!("cannot serve on {}: {e}", config.listen)))?;
    let addr = server.local_addr();
    hs.attr_set(MASTER, ADDR_ATTR, addr.to_string())
        .await
        .map_err(hs_err)?;
    println!("master serving on {addr}");
    let mut master = Master {
        hs: hs.clone(),
        credentials: config.credentials.clone(),
        fs: config.fs.clone(),
        servers: BTreeMap::new(),
        clients: HashMap::new(),
        auto_balance: config.auto_balance,
        load_policy: config.load_balance.clone(),
        load: balance::LoadMeter::default(),
        load_cooldown: balance::LoadCooldown::new(config.clock.clone()),
        clock: config.clock.clone(),
        registry: config.registry.clone(),
        deferred: None,
        waiting: Vec::new(),
        gc_interval: config.gc_interval,
        gc_last: None,
    };
    let result = master
        .control_loop(rx, config.poll_interval, &mut stop, &mut state)
        .await;
    server.shutdown(Duration::from_secs(2)).await;
    if result.is_ok() {
        let _ = hs.close_session().await;
    }
    result
}

/// Resolves when the session is in jeopardy or gone.
async fn lost(state: &mut watch::Receiver<SessionState>) {
    loop {
        if matches!(
            *state.borrow_and_update(),
            SessionState::Jeopardy | SessionState::Expired
        ) {
            return;
        }
        if state.changed().await.is_err() {
            return;
        }
    }
}
