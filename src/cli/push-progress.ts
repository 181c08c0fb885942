/**
 * Progress of `warden push`: a bar on a terminal (bytes, rate, ETA; cli-progress on stderr), plain
 * lines otherwise (what is to be uploaded, then every 10 % of an upload of at least 1 MiB) so logs
 * stay readable.
 */
import cliProgress from "cli-progress";
import type { PushProgress } from "../client/push.js";
import { formatBytes, formatRate } from "./format.js";

export interface ProgressSink {
  /** true when it redraws in place (a bar hiding the cursor), which an interrupt must undo */
  readonly redraws: boolean;
  update(progress: PushProgress): void;
  stop(): void;
}

/** Bytes per second of this run's upload, measured from its first progress report. */
class RateMeter {
  #start: number | undefined;
  #base = 0;
  rate(progress: PushProgress): number {
    const now = performance.now();
    if (this.#start === undefined) {
      this.#start = now;
      this.#base = progress.bytesDone;
      return NaN;
    }
    const seconds = (now - this.#start) / 1000;
    return seconds > 0 ? (progress.bytesDone - this.#base) / seconds : NaN;
  }
}

export class BarProgress implements ProgressSink {
  readonly redraws = true;
  readonly #bar: cliProgress.SingleBar;
  readonly #meter = new RateMeter();
  #started = false;

  constructor(stream: NodeJS.WritableStream) {
    this.#bar = new cliProgress.SingleBar(
      {
        stream,
        format: "{label} [{bar}] {percentage}% | {done} / {whole} | {speed} | ETA {eta_formatted}",
        hideCursor: true,
        etaBuffer: 50,
        fps: 10,
      },
      cliProgress.Presets.shades_classic,
    );
  }

  update(progress: PushProgress): void {
    if (progress.phase === "compiled" || progress.phase === "begun") return;
    const payload = {
      label: `${progress.bundleId}@${progress.revision}`,
      done: formatBytes(progress.bytesDone),
      whole: formatBytes(progress.bytesTotal),
      speed: formatRate(this.#meter.rate(progress)),
    };
    if (!this.#started) {
      this.#started = true;
      this.#bar.start(Math.max(progress.bytesTotal, 1), progress.bytesDone, payload);
    } else {
      this.#bar.update(progress.bytesDone, payload);
    }
  }

  stop(): void {
    if (this.#started) this.#bar.stop();
  }
}

/** Uploads smaller than this finish too fast for per-10 % lines to tell anyone anything. */
const LINES_FROM_BYTES = 1024 * 1024;

export class LineProgress implements ProgressSink {
  readonly redraws = false;
  readonly #write: (line: string) => void;
  readonly #meter = new RateMeter();
  #detailed = false;
  #lastDecile = -1;

  constructor(write: (line: string) => void) {
    this.#write = write;
  }

  update(progress: PushProgress): void {
    if (progress.phase === "begun") {
      const missing = progress.bytesTotal - progress.bytesDone;
      const resumed = progress.bytesDone > 0 ? `, ${formatBytes(progress.bytesDone)} already on the node` : "";
      this.#write(
        `push ${progress.bundleId}@${progress.revision}: ${progress.blobsTotal} blob(s), ${formatBytes(progress.bytesTotal)}; ` +
          `${progress.blobsMissing} to upload (${formatBytes(missing)})${resumed}\n`,
      );
      this.#detailed = missing >= LINES_FROM_BYTES;
      this.#lastDecile = progress.bytesTotal === 0 ? 10 : Math.floor((progress.bytesDone / progress.bytesTotal) * 10);
      this.#meter.rate(progress);
      return;
    }
    if (progress.phase !== "uploading" || !this.#detailed || progress.bytesTotal === 0) return;
    const rate = this.#meter.rate(progress);
    const decile = Math.floor((progress.bytesDone / progress.bytesTotal) * 10);
    if (decile <= this.#lastDecile) return;
    this.#lastDecile = decile;
    this.#write(`uploaded ${formatBytes(progress.bytesDone)} / ${formatBytes(progress.bytesTotal)} (${decile * 10}%) ${formatRate(rate)}\n`);
  }

  stop(): void {}
}
