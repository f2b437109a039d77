"""keras.io/examples/rl/ppo_cartpole (Proximal Policy Optimization) in the torch backend's form that keras.io's
torch guides write: two functional models (``actor`` logits, ``critic`` with ``keras.ops.squeeze`` of its
output) and two ``Adam`` optimizers; the ``Buffer`` with GAE-lambda advantages (``scipy.signal.lfilter``'s
discounted sums written with numpy) normalised in ``get``; ``logprobabilities`` with ``ops.log_softmax`` and
``ops.one_hot``; actions from ``keras.random.categorical(logits, 1, seed=seed_generator)``; ``train_policy``
(clipped ratio, ``ops.where``/``ops.minimum``, the KL early stop) and ``train_value_function`` with
``loss.backward()``, ``[v.value.grad for v in model.trainable_variables]`` and ``optimizer.apply`` under
``torch.no_grad()`` where the example has ``tf.GradientTape`` and ``apply_gradients``.

Distributed as a TensorFlow user distributes a custom loop: the models and optimizers in ``strategy.scope()``;
the rollout stays on one device (``tf.function`` -> ``torch.no_grad()``: torch refuses numpy of a tensor that
requires grad); each update runs in ``strategy.run`` on the buffer, a torch ``DataLoader`` of one global batch
given to ``experimental_distribute_dataset``; the mean losses are divided by ``num_replicas_in_sync`` (the
replicas' gradients are summed, TensorFlow's rule) and the KL reduced with ``MEAN``.

The Gymnasium ``CartPole-v1`` environment is written out (its equations, seeded numpy resets). Shrunk: 64
steps per epoch (4000), hidden (16, 16) (64, 64), 3 epochs, 6 policy and 6 value iterations (80), target_kl
0.003 (0.01) so that the early stop is taken.
"""

import math

import numpy as np
import torch

SOURCE = "https://keras.io/examples/rl/ppo_cartpole/"


class CartPole:
    """Gymnasium's CartPole-v1 dynamics (Euler integration, termination at 12 degrees or 2.4 units)."""

    def __init__(self, seed):
        self.rng, self.state = np.random.RandomState(seed), None

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        return self.state.astype("float32"), {}

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if int(action) == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self.state = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot,
                               theta_dot + 0.02 * theta_acc])
        done = bool(abs(self.state[0]) > 2.4 or abs(self.state[2]) > 12 * 2 * math.pi / 360)
        return self.state.astype("float32"), 1.0, done, False, {}


def discounted_cumulative_sums(x, discount):
    # scipy.signal.lfilter([1], [1, float(-discount)], x[::-1], axis=0)[::-1]
    out, running = np.zeros(len(x), dtype="float64"), 0.0
    for i in reversed(range(len(x))):
        running = x[i] + discount * running
        out[i] = running
    return out


class Buffer:
    def __init__(self, observation_dimensions, size, gamma=0.99, lam=0.95):
        self.observation_buffer = np.zeros((size, observation_dimensions), dtype=np.float32)
        self.action_buffer = np.zeros(size, dtype=np.int32)
        self.advantage_buffer = np.zeros(size, dtype=np.float32)
        self.reward_buffer = np.zeros(size, dtype=np.float32)
        self.return_buffer = np.zeros(size, dtype=np.float32)
        self.value_buffer = np.zeros(size, dtype=np.float32)
        self.logprobability_buffer = np.zeros(size, dtype=np.float32)
        self.gamma, self.lam = gamma, lam
        self.pointer, self.trajectory_start_index = 0, 0

    def store(self, observation, action, reward, value, logprobability):
        self.observation_buffer[self.pointer] = observation
        self.action_buffer[self.pointer] = action[0]
        self.reward_buffer[self.pointer] = reward
        self.value_buffer[self.pointer] = value[0]
        self.logprobability_buffer[self.pointer] = logprobability[0]
        self.pointer += 1

    def finish_trajectory(self, last_value=0):
        path_slice = slice(self.trajectory_start_index, self.pointer)
        rewards = np.append(self.reward_buffer[path_slice], last_value)
        values = np.append(self.value_buffer[path_slice], last_value)
        deltas = rewards[:-1] + self.gamma * values[1:] - values[:-1]
        self.advantage_buffer[path_slice] = discounted_cumulative_sums(deltas, self.gamma * self.lam)
        self.return_buffer[path_slice] = discounted_cumulative_sums(rewards, self.gamma)[:-1]
        self.trajectory_start_index = self.pointer

    def get(self):
        self.pointer, self.trajectory_start_index = 0, 0
        advantage_mean, advantage_std = (np.mean(self.advantage_buffer), np.std(self.advantage_buffer))
        self.advantage_buffer = (self.advantage_buffer - advantage_mean) / advantage_std
        return (self.observation_buffer, self.action_buffer, self.advantage_buffer, self.return_buffer,
                self.logprobability_buffer)


def run(keras, strategy, workdir, scale=1):
    layers = keras.layers
    steps_per_epoch, epochs, gamma, clip_ratio = 64 * scale, 3, 0.99, 0.2
    policy_learning_rate, value_function_learning_rate = 3e-4, 1e-3
    train_policy_iterations, train_value_iterations, lam, target_kl, hidden_sizes = 6, 6, 0.97, 0.003, (16, 16)

    def mlp(x, sizes, activation=keras.activations.tanh, output_activation=None):
        for size in sizes[:-1]:
            x = layers.Dense(units=size, activation=activation)(x)
        return layers.Dense(units=sizes[-1], activation=output_activation)(x)

    def logprobabilities(logits, a):
        logprobabilities_all = keras.ops.log_softmax(logits)
        logprobability = keras.ops.sum(keras.ops.one_hot(a, num_actions) * logprobabilities_all, axis=1)
        return logprobability

    def sample_action(observation):
        logits = actor(observation)
        action = keras.ops.squeeze(keras.random.categorical(logits, 1, seed=seed_generator), axis=1)
        return logits, action

    def train_policy(observation_buffer, action_buffer, logprobability_buffer, advantage_buffer):
        ratio = keras.ops.exp(logprobabilities(actor(observation_buffer), action_buffer) - logprobability_buffer)
        min_advantage = keras.ops.where(advantage_buffer > 0, (1 + clip_ratio) * advantage_buffer,
                                        (1 - clip_ratio) * advantage_buffer)
        policy_loss = -keras.ops.mean(keras.ops.minimum(ratio * advantage_buffer, min_advantage))
        policy_loss = policy_loss / strategy.num_replicas_in_sync
        actor.zero_grad()
        policy_loss.backward()
        policy_grads = [v.value.grad for v in actor.trainable_variables]
        with torch.no_grad():
            policy_optimizer.apply(policy_grads, actor.trainable_variables)
        kl = keras.ops.mean(logprobability_buffer - logprobabilities(actor(observation_buffer), action_buffer))
        kl = keras.ops.sum(kl)
        return kl.detach()

    def train_value_function(observation_buffer, return_buffer):
        value_loss = keras.ops.mean((return_buffer - critic(observation_buffer)) ** 2)
        value_loss = value_loss / strategy.num_replicas_in_sync
        critic.zero_grad()
        value_loss.backward()
        value_grads = [v.value.grad for v in critic.trainable_variables]
        with torch.no_grad():
            value_optimizer.apply(value_grads, critic.trainable_variables)

    env = CartPole(seed=0)
    observation_dimensions, num_actions = 4, 2
    buffer = Buffer(observation_dimensions, steps_per_epoch)
    keras.utils.set_random_seed(0)
    seed_generator = keras.random.SeedGenerator(1337)
    with strategy.scope():
        observation_input = keras.Input(shape=(observation_dimensions,), dtype="float32")
        logits = mlp(observation_input, list(hidden_sizes) + [num_actions])
        actor = keras.Model(inputs=observation_input, outputs=logits)
        value = keras.ops.squeeze(mlp(observation_input, list(hidden_sizes) + [1]), axis=1)
        critic = keras.Model(inputs=observation_input, outputs=value)
        policy_optimizer = keras.optimizers.Adam(learning_rate=policy_learning_rate)
        value_optimizer = keras.optimizers.Adam(learning_rate=value_function_learning_rate)

    observation, _ = env.reset()
    episode_return, episode_length = 0, 0
    out = {"mean_return": [], "kl": [], "policy_iterations": []}
    for epoch in range(epochs):
        sum_return, sum_length, num_episodes = 0, 0, 0
        for t in range(steps_per_epoch):
            observation = observation.reshape(1, -1)
            with torch.no_grad():
                logits, action = sample_action(observation)
                observation_new, reward, done, _, _ = env.step(action[0].numpy())
                episode_return += reward
                episode_length += 1
                value_t = critic(observation)
                logprobability_t = logprobabilities(logits, action)
                buffer.store(observation, action, reward, value_t, logprobability_t)
                observation = observation_new
                terminal = done
                if terminal or (t == steps_per_epoch - 1):
                    last_value = 0 if done else critic(observation.reshape(1, -1))[0]
                    buffer.finish_trajectory(last_value)
                    sum_return += episode_return
                    sum_length += episode_length
                    num_episodes += 1
                    observation, _ = env.reset()
                    episode_return, episode_length = 0, 0
        (observation_buffer, action_buffer, advantage_buffer, return_buffer, logprobability_buffer) = buffer.get()
        dataset = torch.utils.data.TensorDataset(*(torch.from_numpy(a) for a in (
            observation_buffer, action_buffer.astype("int64"), logprobability_buffer, advantage_buffer,
            return_buffer)))
        batch = next(iter(strategy.experimental_distribute_dataset(
            torch.utils.data.DataLoader(dataset, batch_size=steps_per_epoch))))
        observations, actions, logprobs, advantages, returns = batch
        for i in range(train_policy_iterations):
            kl = strategy.reduce("MEAN", strategy.run(train_policy, args=(observations, actions, logprobs,
                                                                           advantages)), axis=None)
            if kl > 1.5 * target_kl:
                break
        for _ in range(train_value_iterations):
            strategy.run(train_value_function, args=(observations, returns))
        out["mean_return"].append(sum_return / num_episodes)
        out["kl"].append(float(kl))
        out["policy_iterations"].append(i + 1)
    probe = np.linspace(-0.1, 0.1, 16, dtype="float32").reshape(4, 4)
    out.update(actor=actor.predict(probe, verbose=0), critic=critic.predict(probe, verbose=0), _model=actor)
    return out
