/**
 * What a key's state "looks like" at an instant, as one number for a chart's state line: tokens in a bucket, the
 * queue's length, a window's count, a sliding counter's estimate. Each algorithm draws its own level from its exact
 * state (`level` in src/algorithms); the charts only ask.
 */
export { capacityLabel, chartWindowOf, levelAt, levelName } from "../algorithms/index.ts";
