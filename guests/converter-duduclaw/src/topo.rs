//! Parents-first order of an expert pack's agents by `reports_to` (the DuDuClaw Expert Pack
//! Format v1.0, §4.2 Topological order: install is topologically ordered), with cycles refused.

/// What the order needs of an agent.
pub trait ReportsTo {
    fn name(&self) -> &str;
    /// The name of the agent this one reports to; empty for none.
    fn reports_to(&self) -> &str;
}

/// Agent indexes, parents before children; siblings keep their file order. An agent whose
/// `reports_to` is empty or names no agent of the pack is a root (the caller reports the latter).
/// A cycle is an error starting with `reports-to-cycle:` and naming the agents in it.
pub fn order<A: ReportsTo>(agents: &[A]) -> Result<Vec<usize>, String> {
    let parent: Vec<Option<usize>> = agents
        .iter()
        .map(|a| {
            let to = a.reports_to();
            (!to.is_empty())
                .then(|| agents.iter().position(|p| p.name() == to))
                .flatten()
        })
        .collect();
    if let Some(cycle) = find_cycle(&parent) {
        let names: Vec<&str> = cycle.iter().map(|&i| agents[i].name()).collect();
        return Err(format!(
            "reports-to-cycle: agents {} report to each other in a cycle ({} -> {}); the pack cannot be installed parents-first",
            names.join(", "),
            names.join(" -> "),
            names[0]
        ));
    }
    // Kahn's algorithm over a forest: repeatedly take, in file order, every agent whose parent
    // is already placed.
    let mut placed = vec![false; agents.len()];
    let mut out = Vec::with_capacity(agents.len());
    while out.len() < agents.len() {
        let before = out.len();
        for i in 0..agents.len() {
            if !placed[i] && parent[i].is_none_or(|p| placed[p]) {
                placed[i] = true;
                out.push(i);
            }
        }
        if out.len() == before {
            // Unreachable after the cycle check; refuse rather than loop.
            return Err("reports-to-cycle: the reports_to graph has a cycle".to_string());
        }
    }
    Ok(out)
}

/// The first cycle found following parent links, as indexes in link order.
fn find_cycle(parent: &[Option<usize>]) -> Option<Vec<usize>> {
    // 0 = unvisited, 1 = on the current path, 2 = done.
    let mut state = vec![0u8; parent.len()];
    for start in 0..parent.len() {
        let mut path = Vec::new();
        let mut node = Some(start);
        while let Some(n) = node {
            match state[n] {
                2 => break,
                1 => {
                    let at = path.iter().position(|&p| p == n).unwrap_or(0);
                    return Some(path[at..].to_vec());
                }
                _ => {
                    state[n] = 1;
                    path.push(n);
                    node = parent[n];
                }
            }
        }
        for n in path {
            state[n] = 2;
        }
    }
    None
}
