/**
 * File repairs of start-up recovery, run only after the audit passed the whole tree: drop temp
 * files and publication twins a crash left behind, remove stage directories whose stage is gone,
 * and cut every partial back to its durable offset (bytes past it were never acknowledged).
 */
import * as fs from "node:fs";
import { dirname, join } from "node:path";
import { digestHex } from "../../core/digest.js";
import { openPrivateFileSync, syncDirSync } from "../../storage/secure-fs.js";
import type { DeliveryAudit } from "./delivery-audit.js";
import { PARTIAL_NAME_RE, type DeliveryLayout } from "./delivery-layout.js";
import { removeStageDirSync, type EmbeddedStageStore } from "./delivery-stage-store.js";

export interface FileRepairReport {
  readonly removedTemps: number;
  readonly removedStageDirs: number;
  readonly truncatedPartials: number;
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
  let truncatedPartials = 0;
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
      const size = fs.existsSync(path) ? fs.lstatSync(path).size : undefined;
      const ref = { digest: blob.digest, byte_len: blob.byte_len };
      if (size === undefined) {
        // A fully received blob without partial may have been published: settling decides.
        if (blob.received > 0 && blob.received < blob.byte_len) await stages.requireBlob(stage.stage_id, ref);
      } else if (size > blob.received) {
        truncateSync(path, blob.received);
        truncatedPartials++;
      } else if (size < blob.received) {
        await stages.requireBlob(stage.stage_id, ref);
      }
    }
  }
  for (const dir of touched) if (fs.existsSync(dir)) syncDirSync(dir);
  return { removedTemps: audit.blobTemps.length, removedStageDirs, truncatedPartials };
}

function truncateSync(path: string, length: number): void {
  const fd = openPrivateFileSync(path, "readwrite");
  try {
    fs.ftruncateSync(fd, length);
    fs.fdatasyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
