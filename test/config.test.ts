import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../api/main/config.js';

describe('configuration', () => {
  it('has working defaults with an empty environment', () => {
    const c = loadConfig({});
    assert.equal(c.port, 8080);
    assert.equal(c.redisUrl, 'redis://127.0.0.1:6379');
    assert.equal(c.redisUrlDefaulted, true);
    assert.equal(c.dataDir, './.data');
    assert.equal(c.mongoUrl, undefined);
    assert.equal(c.adminToken, undefined);
    assert.equal(c.jsonBodyLimitBytes, 1024 * 1024);
    assert.equal(c.publicUrl, 'http://127.0.0.1:8080');
    assert.equal(c.prices['inference:image:generate'], 4);
  });

  it('reads every variable', () => {
    const c = loadConfig({
      PORT: '9000', HOST: '0.0.0.0', PUBLIC_URL: 'https://api.example.com/', REDIS_URL: 'redis://redis:6379/2', REDIS_PREFIX: 'prod',
      MONGO_URL: 'mongodb://mongo:27017/?replicaSet=rs0', MONGO_DB: 'sy', ADMIN_TOKEN: 'a'.repeat(32), DATA_DIR: '/var/lib/sy',
      PRICES: '{"inference:rig": 7}', RUN_RETENTION_DAYS: '7', JOB_MAX_ATTEMPTS: '5', JSON_BODY_LIMIT: '256kb', JSON_MAX_DEPTH: '20',
      RATE_LIMIT_PER_SEC: '10', RATE_LIMIT_BURST: '20', TRUST_PROXY: 'true', LOG_LEVEL: 'debug',
    });
    assert.equal(c.port, 9000);
    assert.equal(c.publicUrl, 'https://api.example.com');
    assert.equal(c.redisUrlDefaulted, false);
    assert.equal(c.mongoUrl, 'mongodb://mongo:27017/?replicaSet=rs0');
    assert.equal(c.prices['inference:rig'], 7);
    assert.equal(c.prices['inference:image:generate'], 4, 'other kinds keep their price');
    assert.equal(c.runRetentionSeconds, 7 * 86400);
    assert.equal(c.jsonBodyLimitBytes, 256 * 1024);
    assert.equal(c.trustProxy, true);
  });

  it('names every problem at once', () => {
    try {
      loadConfig({ PORT: 'eighty', REDIS_URL: 'localhost:6379', ADMIN_TOKEN: 'short', PRICES: '{"inference:nope": 1, "inference:rig": -2}', LOG_LEVEL: 'loud' });
      assert.fail('should have thrown');
    } catch (err) {
      assert.ok(err instanceof ConfigError);
      const text = err.message;
      for (const name of ['PORT', 'REDIS_URL', 'ADMIN_TOKEN', 'inference:nope', 'inference:rig', 'LOG_LEVEL']) assert.match(text, new RegExp(name));
      assert.equal(err.problems.length, 6);
    }
  });

  it('treats empty variables as unset', () => {
    assert.equal(loadConfig({ ADMIN_TOKEN: '', MONGO_URL: '' }).adminToken, undefined);
  });
});
