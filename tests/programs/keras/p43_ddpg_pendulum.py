"""keras.io/examples/rl/ddpg_pendulum (its TensorFlow 2 text), typed with ``tf.GradientTape`` ->
``md.GradientTape`` and ``@tf.function`` -> ``@md.function``: actor and critic networks and their target
copies (``target_actor.set_weights(actor_model.get_weights())`` to start equal), an Ornstein-Uhlenbeck action
noise, a replay ``Buffer`` whose ``update`` (an ``md.function`` method) trains the critic on the target
networks' bootstrapped values and the actor on ``-mean(critic(state, actor(state)))``, each with its own
``Adam``, and the targets' soft update by hand, ``update_target``: an ``md.function`` over the two models'
``variables`` running ``a.assign(b * tau + a * (1 - tau))``. The models and optimizers are built in
``strategy.scope()``; the loop runs in cross-replica context, as a TF user runs it after adding the scope
(every replica's copy takes each update).

Keras 3 (torch backend) runs it on no device: ``policy`` calls ``.numpy()`` on the actor's output, which torch
refuses while it requires grad (the example needs Keras 3's TensorFlow backend, as p36).
The environment is gym's Pendulum-v1 dynamics (``g=10``, ``dt=0.05``, torque and speed limits) reset to a seeded
state instead of ``gym.make("Pendulum-v1")``. Shrunk: 32 hidden units, 2 episodes of 12 steps, batch 16,
``tau=0.05`` (so the soft update moves the targets visibly).
"""

import numpy as np

import multidev as md

SOURCE = "https://keras.io/examples/rl/ddpg_pendulum/"
num_states, num_actions = 3, 1
upper_bound, lower_bound = 2.0, -2.0


class Pendulum:
    """gym's Pendulum-v1: state (theta, theta_dot), observation (cos, sin, theta_dot), reward -cost."""

    def __init__(self, seed, max_steps=12):
        self.rng, self.max_steps = np.random.RandomState(seed), max_steps

    def reset(self):
        self.state, self.steps = self.rng.uniform([-np.pi, -1.0], [np.pi, 1.0]), 0
        return self._obs(), {}

    def _obs(self):
        theta, theta_dot = self.state
        return np.array([np.cos(theta), np.sin(theta), theta_dot], dtype="float32")

    def step(self, action):
        theta, theta_dot = self.state
        u = float(np.clip(action, -2.0, 2.0)[0])
        normalized = ((theta + np.pi) % (2 * np.pi)) - np.pi
        cost = normalized**2 + 0.1 * theta_dot**2 + 0.001 * u**2
        theta_dot = np.clip(theta_dot + (3 * 10.0 / 2 * np.sin(theta) + 3.0 * u) * 0.05, -8.0, 8.0)
        self.state, self.steps = np.array([theta + theta_dot * 0.05, theta_dot]), self.steps + 1
        return self._obs(), -cost, False, self.steps >= self.max_steps, {}


class OUActionNoise:
    def __init__(self, mean, std_deviation, theta=0.15, dt=1e-2, x_initial=None):
        self.theta = theta
        self.mean = mean
        self.std_dev = std_deviation
        self.dt = dt
        self.x_initial = x_initial
        self.reset()

    def __call__(self):
        # Formula taken from https://www.wikipedia.org/wiki/Ornstein-Uhlenbeck_process
        x = (self.x_prev + self.theta * (self.mean - self.x_prev) * self.dt
             + self.std_dev * np.sqrt(self.dt) * np.random.normal(size=self.mean.shape))
        # Store x into x_prev
        # Makes next noise dependent on current one
        self.x_prev = x
        return x

    def reset(self):
        if self.x_initial is not None:
            self.x_prev = self.x_initial
        else:
            self.x_prev = np.zeros_like(self.mean)


def run(keras, strategy, workdir, scale=1):
    layers, ops = keras.layers, keras.ops
    np.random.seed(0)
    keras.utils.set_random_seed(0)
    env = Pendulum(seed=1)
    gamma, tau = 0.99, 0.05

    def get_actor():
        # Initialize weights between -3e-3 and 3-e3
        last_init = keras.initializers.RandomUniform(minval=-0.003, maxval=0.003)
        inputs = layers.Input(shape=(num_states,))
        out = layers.Dense(32, activation="relu")(inputs)
        out = layers.Dense(32, activation="relu")(out)
        outputs = layers.Dense(1, activation="tanh", kernel_initializer=last_init)(out)
        # Our upper bound is 2.0 for Pendulum.
        outputs = outputs * upper_bound
        return keras.Model(inputs, outputs)

    def get_critic():
        # State as input
        state_input = layers.Input(shape=(num_states,))
        state_out = layers.Dense(16, activation="relu")(state_input)
        state_out = layers.Dense(32, activation="relu")(state_out)
        # Action as input
        action_input = layers.Input(shape=(num_actions,))
        action_out = layers.Dense(32, activation="relu")(action_input)
        # Both are passed through seperate layer before concatenating
        concat = layers.Concatenate()([state_out, action_out])
        out = layers.Dense(32, activation="relu")(concat)
        out = layers.Dense(32, activation="relu")(out)
        outputs = layers.Dense(1)(out)
        # Outputs single value for give state-action
        return keras.Model([state_input, action_input], outputs)

    with strategy.scope():
        actor_model = get_actor()
        critic_model = get_critic()
        target_actor = get_actor()
        target_critic = get_critic()
        # Making the weights equal initially
        target_actor.set_weights(actor_model.get_weights())
        target_critic.set_weights(critic_model.get_weights())
        critic_optimizer = keras.optimizers.Adam(0.002)
        actor_optimizer = keras.optimizers.Adam(0.001)

    class Buffer:
        def __init__(self, buffer_capacity=100000, batch_size=64):
            self.buffer_capacity = buffer_capacity   # Number of "experiences" to store at max
            self.batch_size = batch_size             # Num of tuples to train on.
            self.buffer_counter = 0                  # Its tells us num of times record() was called.
            self.state_buffer = np.zeros((self.buffer_capacity, num_states))
            self.action_buffer = np.zeros((self.buffer_capacity, num_actions))
            self.reward_buffer = np.zeros((self.buffer_capacity, 1))
            self.next_state_buffer = np.zeros((self.buffer_capacity, num_states))

        # Takes (s,a,r,s') observation tuple as input
        def record(self, obs_tuple):
            # Set index to zero if buffer_capacity is exceeded, replacing old records
            index = self.buffer_counter % self.buffer_capacity
            self.state_buffer[index] = obs_tuple[0]
            self.action_buffer[index] = obs_tuple[1]
            self.reward_buffer[index] = obs_tuple[2]
            self.next_state_buffer[index] = obs_tuple[3]
            self.buffer_counter += 1

        # Eager execution is turned on by default in TensorFlow 2. Decorating with tf.function allows
        # TensorFlow to build a static graph out of the logic and computations in our function.
        @md.function
        def update(self, state_batch, action_batch, reward_batch, next_state_batch):
            # Training and updating Actor & Critic networks.
            with md.GradientTape() as tape:
                target_actions = target_actor(next_state_batch, training=True)
                y = reward_batch + gamma * target_critic([next_state_batch, target_actions], training=True)
                critic_value = critic_model([state_batch, action_batch], training=True)
                critic_loss = ops.mean(ops.square(y - critic_value))
            critic_grad = tape.gradient(critic_loss, critic_model.trainable_variables)
            critic_optimizer.apply_gradients(zip(critic_grad, critic_model.trainable_variables))
            with md.GradientTape() as tape:
                actions = actor_model(state_batch, training=True)
                critic_value = critic_model([state_batch, actions], training=True)
                # Used `-value` as we want to maximize the value given by the critic for our actions
                actor_loss = -ops.mean(critic_value)
            actor_grad = tape.gradient(actor_loss, actor_model.trainable_variables)
            actor_optimizer.apply_gradients(zip(actor_grad, actor_model.trainable_variables))
            return critic_loss, actor_loss

        # We compute the loss and update parameters
        def learn(self):
            # Get sampling range
            record_range = min(self.buffer_counter, self.buffer_capacity)
            # Randomly sample indices
            batch_indices = np.random.choice(record_range, self.batch_size)
            # Convert to tensors
            state_batch = ops.convert_to_tensor(self.state_buffer[batch_indices], dtype="float32")
            action_batch = ops.convert_to_tensor(self.action_buffer[batch_indices], dtype="float32")
            reward_batch = ops.convert_to_tensor(self.reward_buffer[batch_indices])
            reward_batch = ops.cast(reward_batch, dtype="float32")
            next_state_batch = ops.convert_to_tensor(self.next_state_buffer[batch_indices], dtype="float32")
            return self.update(state_batch, action_batch, reward_batch, next_state_batch)

    # This update target parameters slowly
    # Based on rate `tau`, which is much less than one.
    @md.function
    def update_target(target_weights, weights, tau):
        for a, b in zip(target_weights, weights):
            a.assign(b * tau + a * (1 - tau))

    def policy(state, noise_object):
        sampled_actions = ops.squeeze(actor_model(state))
        noise = noise_object()
        # Adding noise to action
        sampled_actions = sampled_actions.numpy() + noise
        # We make sure action is within bounds
        legal_action = np.clip(sampled_actions, lower_bound, upper_bound)
        return [np.squeeze(legal_action)]

    std_dev = 0.2
    ou_noise = OUActionNoise(mean=np.zeros(1), std_deviation=float(std_dev) * np.ones(1))
    buffer = Buffer(50000, 16)
    ep_reward_list, losses = [], []
    for ep in range(2 * scale):
        prev_state, _ = env.reset()
        episodic_reward = 0
        while True:
            tf_prev_state = ops.expand_dims(ops.convert_to_tensor(prev_state), 0)
            action = policy(tf_prev_state, ou_noise)
            # Recieve state and reward from environment.
            state, reward, done, truncated, _ = env.step(action)
            buffer.record((prev_state, action, reward, state))
            episodic_reward += reward
            critic_loss, actor_loss = buffer.learn()
            losses.append([float(critic_loss), float(actor_loss)])
            update_target(target_actor.variables, actor_model.variables, tau)
            update_target(target_critic.variables, critic_model.variables, tau)
            # End this episode when `done` or `truncated` is True
            if done or truncated:
                break
            prev_state = state
        ep_reward_list.append(episodic_reward)
    probe = np.random.RandomState(2).uniform(-1, 1, (4, num_states)).astype("float32")
    probe_actions = np.random.RandomState(3).uniform(-2, 2, (4, num_actions)).astype("float32")
    return {"_model": target_actor, "ep_reward": ep_reward_list, "losses": losses,
            "actor": actor_model.predict(probe, verbose=0), "target_actor": target_actor.predict(probe, verbose=0),
            "critic": critic_model.predict([probe, probe_actions], verbose=0),
            "target_critic": target_critic.predict([probe, probe_actions], verbose=0)}
