"""What runs on a device before anything leaves it (ARCHITECTURE.md: device/): the bugs and pipeline
faults a device's app applies (`pixels`, `tokenization`, `rollout`), canary insertion (`canaries`,
`gan_canaries`, `lm_canaries`), and the on-device preparation and selection of each scenario's examples
(`gan_data`, `lm_data`, `label_presence`). Every transform of a device's data follows `transform.DeviceTransform`."""
