/** The leaves of a C2SP tlog-tiles entry bundle (uint16 big-endian length, then the leaf), as a monitor reads them. */
export function entryLeaves(bundle: Buffer): Buffer[] {
  const leaves: Buffer[] = [];
  for (let at = 0; at < bundle.byteLength; at += 2 + bundle.readUInt16BE(at)) leaves.push(bundle.subarray(at + 2, at + 2 + bundle.readUInt16BE(at)));
  return leaves;
}
