// files.mjs: files.read, write, list, makeDir, remove, rename, exists,
// getInfo, through E2B's SDK (uploads and downloads go through /files).
import { Sandbox, FileNotFoundError, NotFoundError } from 'e2b'
import { assert, check, rejection, template } from './check.mjs'

const sbx = await Sandbox.create(template, { timeoutMs: 300_000 })
const bytes = new Uint8Array(256 * 1024).map((_, i) => (i * 7919) & 255)

await check('write and read text, into a directory made on the way', async () => {
  const info = await sbx.files.write('/tmp/new/dir/hello.txt', 'hello, files\n')
  assert.equal(info.path, '/tmp/new/dir/hello.txt')
  assert.equal(await sbx.files.read('/tmp/new/dir/hello.txt'), 'hello, files\n')
  assert.equal((await sbx.commands.run('cat /tmp/new/dir/hello.txt')).stdout, 'hello, files\n')
})

await check('write and read 256 KiB of every byte value', async () => {
  await sbx.files.write('/tmp/bin', bytes)
  const back = await sbx.files.read('/tmp/bin', { format: 'bytes' })
  assert.deepEqual(Buffer.from(back), Buffer.from(bytes))
  assert.equal((await sbx.commands.run('wc -c < /tmp/bin')).stdout.trim(), String(bytes.length))
})

await check('write many files in one upload', async () => {
  await sbx.files.write([{ path: '/tmp/m/one', data: '1' }, { path: '/tmp/m/two', data: '22' }])
  assert.equal(await sbx.files.read('/tmp/m/one'), '1')
  assert.equal(await sbx.files.read('/tmp/m/two'), '22')
})

await check('list a directory, and to a depth', async () => {
  const names = (await sbx.files.list('/tmp/m')).map(e => `${e.name}:${e.type}:${e.size}`).sort()
  assert.deepEqual(names, ['one:file:1', 'two:file:2'])
  const deep = (await sbx.files.list('/tmp/new', { depth: 2 })).map(e => e.path).sort()
  assert.deepEqual(deep, ['/tmp/new/dir', '/tmp/new/dir/hello.txt'])
})

await check('makeDir: true when made, false when there', async () => {
  assert.equal(await sbx.files.makeDir('/tmp/a/b/c'), true)
  assert.equal(await sbx.files.makeDir('/tmp/a/b/c'), false)
  assert.equal((await sbx.files.getInfo('/tmp/a/b/c')).type, 'dir')
})

await check('exists and getInfo', async () => {
  assert.equal(await sbx.files.exists('/tmp/bin'), true)
  assert.equal(await sbx.files.exists('/tmp/no-such-file'), false)
  const info = await sbx.files.getInfo('/tmp/bin')
  assert.equal(info.name, 'bin')
  assert.equal(info.type, 'file')
  assert.equal(info.size, bytes.length)
  assert.equal(info.permissions, '-rw-r--r--')
  assert.ok(Math.abs(info.modifiedTime.getTime() - Date.now()) < 120_000)
})

await check('rename moves it', async () => {
  const moved = await sbx.files.rename('/tmp/m/one', '/tmp/a/one')
  assert.equal(moved.path, '/tmp/a/one')
  assert.equal(await sbx.files.exists('/tmp/m/one'), false)
  assert.equal(await sbx.files.read('/tmp/a/one'), '1')
})

await check('remove a tree', async () => {
  await sbx.files.remove('/tmp/a')
  assert.equal(await sbx.files.exists('/tmp/a'), false)
  assert.equal(await sbx.files.exists('/tmp/a/one'), false)
})

await check('read of a file that is not there is FileNotFoundError', async () => {
  const err = await rejection(sbx.files.read('/tmp/no-such-file'))
  assert.ok(err instanceof FileNotFoundError || err instanceof NotFoundError, err.constructor.name)
})

await sbx.kill()
