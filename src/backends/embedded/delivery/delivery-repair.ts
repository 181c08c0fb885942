/**
 * File repairs of start-up recovery, run only after the audit passed the whole tree: drop temp
 * files and publication twins a crash left behind, remove stage directories whose stage is gone,
 * and make every partial's length durable: it is the offset its blob resumes from (a crash of
 * the machine may have cut an unsynced tail, and the client then resumes earlier; bytes that are
 * not the blob's are caught by the digest check when the blob completes).
 */
import * as fs from "node:fs";
import { dirname, join } from "node:path";
import { digestHex } from "../../../core/digest.js";
import { openPrivateFileSync, syncDirSync } from "../../../storage/secure-fs.js";
import type { DeliveryAudit } from "./delivery-audit.js";
import { datasync, lstatOrUndefined } from "./delivery-fd-io.js";
import { PARTIAL_NAME_RE, type DeliveryLayout } from "./delivery-layout.js";
import { removeStageDirSync, type EmbeddedStageStore } from "./delivery-stage-store.js";

export interface FileRepairReport {
  readonly removedTemps: number;
  readonly removedStageDirs: number;
  /** Partials longer than their blob (no chunk this store accepts makes one): dropped, the blob restarts at 0. */
  readonly droppedPartials: number;
}

export async function repairDeliveryFiles(audit: DeliveryAudit, layout: DeliveryLayout, stages: EmbeddedStageStore): Promise<FileRepairReport> {
  const touched = new Set<string>();
  for (const path of [...audit.blobTemps, ...audit.twinPartials]) {
    fs.unlinkSync(path);
    touched.add(dirname(path));
  }
  const records = new Map((await stages.list()).map((stage) => [stage.stage_id, stage]));
  let removedStageDirs = 0;
  for (const stageId of audit.stageDirs) {
    if (records.has(stageId)) continue;
    removeStageDirSync(layout.stageDir(stageId));
    touched.add(layout.stagesDir);
    removedStageDirs++;
  }
  let droppedPartials = 0;
  const kept: string[] = [];
  for (const stage of records.values()) {
    const receiving = new Map(stage.blobs.filter((b) => !b.complete).map((b) => [digestHex(b.digest), b]));
    const dir = layout.stageDir(stage.stage_id);
    for (const name of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
      const hex = PARTIAL_NAME_RE.exec(name)?.[1];
      if (hex !== undefined && !receiving.has(hex)) {
        fs.unlinkSync(join(dir, name));
        touched.add(dir);
      }
    }
    for (const blob of receiving.values()) {
      const path = layout.partialPath(stage.stage_id, blob.digest);
      const size = lstatOrUndefined(path)?.size;
      if (size === undefined) continue;
      if (size > blob.byte_len) {
        await stages.requireBlob(stage.stage_id, { digest: blob.digest, byte_len: blob.byte_len });
        touched.add(dir);
        droppedPartials++;
      } else {
        kept.push(path);
      }
    }
  }
  await Promise.all(kept.map(syncFile));
  for (const dir of touched) if (fs.existsSync(dir)) syncDirSync(dir);
  return { removedTemps: audit.blobTemps.length, removedStageDirs, droppedPartials };
}

async function syncFile(path: string): Promise<void> {
  const fd = openPrivateFileSync(path, "read");
  try {
    await datasync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
