// check.mjs: what the scripts of tests/e2b share.  Each prints "ok - ..."
// for every check that held and exits non-zero at the first that did not.
import assert from 'node:assert/strict'

export { assert }

export async function check(what, fn) {
  try {
    await fn()
    console.log(`ok - ${what}`)
  } catch (err) {
    console.log(`not ok - ${what}`)
    console.log(String(err && err.stack ? err.stack : err).split('\n').map(l => `# ${l}`).join('\n'))
    process.exit(1)
  }
}

// The error a promise rejects with (it must reject).
export async function rejection(p) {
  try {
    await p
  } catch (err) {
    return err
  }
  throw new Error('expected an error, got none')
}

export const template = process.env.SPACE_E2B_TEMPLATE || 'minimal'
