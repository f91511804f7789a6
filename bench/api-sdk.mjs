// api-sdk.mjs N: N times, E2B's SDK creates a sandbox and runs `true` in it,
// timed from the call to the command's end; one line of milliseconds each
// (the kill is not timed).  One create and run before them is not timed
// either: a Node process's first call compiles and connects (~110 ms), as
// an agent's long-lived process does once.  E2B_API_URL, E2B_SANDBOX_URL
// and E2B_API_KEY name the server (bench/api).
import { createRequire } from 'node:module'
const { Sandbox } = createRequire(import.meta.url)('../tests/e2b/node_modules/e2b')

const n = Number(process.argv[2] || 1)
const template = process.env.TEMPLATE || 'minimal'
const warm = await Sandbox.create(template)
await warm.commands.run('true')
await warm.kill()
for (let i = 0; i < n; i++) {
  const t0 = performance.now()
  const sbx = await Sandbox.create(template)
  await sbx.commands.run('true')
  const ms = performance.now() - t0
  console.log(ms.toFixed(3))
  await sbx.kill()
}
