export * from "./types.js";
export type { ClaimStore, ClaimKey, ClaimRecord, ClaimState, NewClaim, ClaimAttempt, ClaimListFilter, JournalSeal, StoredResult } from "./claim-store.js";
export { Invocations, type InvocationsOptions } from "./service.js";
export { InvocationHandle, EffectFailed, type FreshOutcome, type OpenOutcome, type RunJournal } from "./handle.js";
export { verifyReceipt, parseReview, RECONCILIATION_SIGNING_PREFIX, TEMPLATE_RATIONALE, type ReceiptVerification } from "./reconciliation.js";
export { claimHashOf } from "./claim-hash.js";
export { recordedCopies } from "./seed.js";
export { RunChecker, sharedRunChecker, setSharedRunChecker, type RunCheckerOptions } from "./run-checker.js";
export type { RunCheck } from "./run-check.js";
