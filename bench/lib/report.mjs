// Renders a bench result (as written to bench/results/*.json) as a Markdown report.
const cell = (v) => (v === undefined || v === null || v === '' ? '' : String(v).replace(/\|/g, '\\|'));

export function renderMarkdown(r) {
  const m = r.machine;
  const f = r.floor;
  const out = [];
  out.push(`# gear-rl benchmark ${r.date.slice(0, 10)} (commit ${r.commit}${r.dirty ? ', uncommitted changes' : ''})`);
  out.push('');
  out.push(`* Machine: ${m.cpu}, ${m.cores} cores, ${m.memGiB} GiB, ${m.platform}, Node ${m.node}`);
  out.push(`* Backend: ${m.backend.variant} / ${m.backend.isa}, ${r.threads} threads, gear-rl ${m.backend.version}${r.quick ? ' — QUICK run (small shapes)' : ''}`);
  out.push(`* Floor (same run, ${f.threads} threads, ${Math.round(f.bytes / 2 ** 20)} MiB buffers, median of ${f.reps}): ` +
    `read ${f.readGBs} GB/s (1 stream/thread ${f.read1GBs}, 2 streams/thread ${f.read2GBs}), copy with non-temporal stores ${f.copyGBs} GB/s`);
  if (r.earlierRuns?.length) out.push(`* Rows of ${r.earlierRuns.length} earlier run(s) on this commit are merged in; their % of floor uses their own run's floor.`);
  out.push('');
  out.push('GB/s = bytes the op must move (read + written) / time. % of floor = that over the read floor (or the copy');
  out.push('floor where the row says so). % local = each repetition\'s GB/s over the higher of the read bandwidths probed');
  out.push('just before and just after it (512 MiB, one stream per thread), the median over the repetitions: the machine\'s');
  out.push('bandwidth drifts within minutes, so this is the steadier figure. Rows of the computeCeiling bench give the');
  out.push('highest % of floor an op can reach on this machine (see bench/README.md). Speedup = peer ms / our ms, same run.');
  out.push('');
  out.push('| bench | op | dtype | shape | ms | ns/elem | GB/s | % floor | % local | peer | peer ms | speedup | note |');
  out.push('| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |');
  for (const x of r.rows) {
    const pct = x.pctFloor === undefined ? '' : `${x.pctFloor}${x.floorKind === 'copy' ? ' (copy)' : ''}`;
    const local = x.pctLocalFloor === undefined ? '' : `${x.pctLocalFloor} (${x.localFloorGBs} GB/s)`;
    out.push(`| ${[x.bench, x.op, x.dtype, x.shape, x.ms, x.nsPerElem, x.gbs, pct, local, x.peer, x.peerMs, x.speedup ? `${x.speedup}x` : '', x.note]
      .map(cell).join(' | ')} |`);
  }
  const failed = r.benches.filter((b) => b.error);
  if (failed.length) {
    out.push('');
    out.push('## Failed benches');
    for (const b of failed) out.push(`* ${b.name}: ${b.error}`);
  }
  out.push('');
  return out.join('\n');
}
